package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// healthcheck asks a local turnd whether it is ready (GET /readyz) and
// fails unless it answers 200: the container health check of an image
// without a shell or an HTTP client (distroless).
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := envLookup(env).get("TURND_ADDR", defaultAddr)
	url := fs.String("url", "", "the URL to ask (default http://ADDR/readyz, ADDR from TURND_ADDR, an unspecified host asked on 127.0.0.1)")
	live := fs.Bool("live", false, "ask /healthz (the process answers) instead of /readyz (it answers and its store is reachable)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: turnd healthcheck [--url URL] [--live] [--timeout 3s]\n\nExits 0 when the local turnd answers 200, 1 otherwise.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	target := *url
	if target == "" {
		path := "/readyz"
		if *live {
			path = "/healthz"
		}
		target = "http://" + localAddr(addr) + path
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return usageError{fmt.Sprintf("healthcheck: %v", err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %d: %s", target, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(string(body)))
	return nil
}

// localAddr turns a listen address into one to dial on this host: an
// unspecified host (":8080", "0.0.0.0:8080", "[::]:8080") becomes loopback.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
