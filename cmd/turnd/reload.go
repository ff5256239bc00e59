package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/turnd/turnd/tool"
)

// mcpWait bounds how long opening or reloading the tool config waits for a
// new MCP server's first answer; one that has not answered by then is
// retried in the background, its tools absent until it answers.
const mcpWait = 10 * time.Second

// openTools opens the tool config (none without --config) as a live
// registry, which MCP servers' tool lists keep current, and reloads it on
// every SIGHUP until stopReload is called. Turns already running keep the
// registry they started with; a config that does not load is logged and
// the current tools stay. SIGHUP is caught from the start: one that comes
// while the tools open is handled once they are, instead of ending the
// process (its default).
func openTools(ctx context.Context, c config, log *slog.Logger, client *http.Client) (live *tool.Live, stopReload func(), err error) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	octx, cancel := context.WithTimeout(ctx, mcpWait)
	defer cancel()
	live, err = tool.Open(octx, c.ConfigPath, tool.Options{Logger: log, LogCompletionURLs: c.Demo, HTTPClient: client})
	if err != nil {
		signal.Stop(sig)
		return nil, nil, err
	}
	log.Info("tools registered", "count", len(live.Registry().List()), "tools", toolNames(live.Registry()))
	return live, reloadOn(sig, live, c.ConfigPath, log), nil
}

// reloadOn reloads the tool config on every signal on sig until the
// returned stop is called.
func reloadOn(sig chan os.Signal, live *tool.Live, path string, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-sig:
			}
			if path == "" {
				log.Warn("SIGHUP: there is no tool config to reload (no --config)")
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), mcpWait)
			err := live.Reload(ctx)
			cancel()
			if err != nil {
				log.Error("tool config reload failed; the current tools stay", "path", path, "err", err)
				continue
			}
			log.Info("tool config reloaded", "path", path, "count", len(live.Registry().List()), "tools", toolNames(live.Registry()))
		}
	}()
	return func() {
		signal.Stop(sig)
		close(quit)
		<-done
	}
}

func toolNames(r *tool.Registry) string {
	names := make([]string, 0)
	for _, t := range r.List() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ",")
}
