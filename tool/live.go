package tool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by Reload after Close.
var ErrClosed = errors.New("tool: the live registry is closed")

// Live holds the current registry of a tool config file and replaces it,
// whole, on Reload or when an MCP server's tool list changes; a turn takes
// Registry (cheap, lock-free) once and keeps it. Use Live for a config with
// mcp entries: Parse refuses those. See ARCHITECTURE.md, "Tool
// registries and MCP servers".
type Live struct {
	path       string
	opts       Options // with defaults; HTTPClient is client
	log        *slog.Logger
	client     *http.Client
	ownsClient bool

	cur atomic.Pointer[Registry]

	reloadMu sync.Mutex // one Reload (or Close) at a time

	mu      sync.Mutex // guards the fields below and every store to cur
	static  []*Spec    // the config's own tools
	servers []*mcpServer
	retired []*mcpServer // dropped by reloads; a late call may still use one
	changed chan struct{}
	closed  bool
}

// Open reads the tool config at path (see Parse for its shape) and connects
// to its MCP servers, waiting for each one's first answer until ctx ends.
// A config error is returned as Parse returns it, naming path, with
// nothing left open; an MCP server that cannot be reached is not an error. An empty path is an empty
// config, which Reload keeps. Close the Live when done.
func Open(ctx context.Context, path string, opts Options) (*Live, error) {
	opts = opts.withDefaults()
	l := &Live{path: path, log: opts.Logger, changed: make(chan struct{})}
	if opts.HTTPClient == nil {
		opts.HTTPClient = NewHTTPClient()
		l.ownsClient = true
	}
	l.client = opts.HTTPClient
	l.opts = opts
	data, err := l.read()
	if err == nil {
		err = l.apply(ctx, data)
	}
	if err != nil {
		if l.ownsClient {
			l.client.CloseIdleConnections()
		}
		return nil, err
	}
	return l, nil
}

// Registry returns the current registry. It is never nil.
func (l *Live) Registry() *Registry { return l.cur.Load() }

// Changed returns a channel that is closed when the registry is next
// replaced (by a reload or an MCP server's new tool list).
func (l *Live) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Reload reads the config file again and, if it is valid, replaces the
// registry: tools may be added, removed or changed. On an error (the file
// is unreadable or invalid: the error is the same as Open's) the current
// registry stays. New MCP servers are waited for as in Open; servers no
// longer configured are disconnected once their calls in flight end.
func (l *Live) Reload(ctx context.Context) error {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	data, err := l.read()
	if err != nil {
		return err
	}
	if err := l.apply(ctx, data); err != nil {
		return err
	}
	l.client.CloseIdleConnections()
	return nil
}

// read reads the config file; no path is an empty config.
func (l *Live) read() ([]byte, error) {
	if l.path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(l.path)
	if err != nil {
		return nil, fmt.Errorf("tool: reading config: %w", err)
	}
	return data, nil
}

// apply parses a config and makes it current (l.reloadMu held, or during
// Open).
func (l *Live) apply(ctx context.Context, data []byte) error {
	ld, specs, err := parse(l.path, data, l.opts)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.servers
	l.mu.Unlock()

	used := make([]bool, len(old))
	next := make([]*mcpServer, 0, len(ld.mcp))
	var fresh []*mcpServer
	for _, src := range ld.mcp {
		var s *mcpServer
		for j, o := range old {
			if !used[j] && o.key == src.key() {
				used[j], s = true, o
				break
			}
		}
		if s != nil {
			s.reconfigure(src)
		} else {
			s = newMCPServer(l, src)
			fresh = append(fresh, s)
		}
		next = append(next, s)
	}
	for _, s := range fresh {
		s.start()
	}
	for _, s := range fresh {
		select {
		case <-s.first:
		case <-ctx.Done():
		}
	}

	l.mu.Lock()
	l.static, l.servers = specs, next
	l.rebuildLocked()
	l.mu.Unlock()
	for j, o := range old {
		if !used[j] {
			o.retire()
			l.mu.Lock()
			l.retired = append(l.retired, o)
			l.mu.Unlock()
		}
	}
	return nil
}

// rebuild publishes a new registry from the config's tools and the MCP
// servers' latest lists.
func (l *Live) rebuild() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.rebuildLocked()
	}
}

// rebuildLocked (l.mu held): the config's own tools come first, then each
// MCP server's in config order; an MCP tool whose name is taken is left
// out with a warning (use mcp.prefix to tell servers apart).
func (l *Live) rebuildLocked() {
	specs := slices.Clone(l.static)
	taken := make(map[string]bool, len(specs))
	for _, s := range specs {
		taken[s.Name] = true
	}
	for _, srv := range l.servers {
		for _, s := range srv.currentSpecs() {
			if taken[s.Name] {
				srv.log.Warn("MCP tool left out: another tool has its name; set mcp.prefix to tell them apart", "tool", s.Name)
				continue
			}
			taken[s.Name] = true
			specs = append(specs, s)
		}
	}
	r := NewRegistry(specs...)
	r.client = l.client
	r.now = l.opts.Now
	l.cur.Store(r)
	close(l.changed)
	l.changed = make(chan struct{})
}

// Close disconnects every MCP server, calls in flight or not, and closes
// the idle connections of the HTTP client it made. The current registry
// stays readable; its MCP tools answer tool_unavailable.
func (l *Live) Close() {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	servers := append(slices.Clone(l.servers), l.retired...)
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(s.shutdown)
	}
	wg.Wait()
	if l.ownsClient {
		l.client.CloseIdleConnections()
	}
}
