package tool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
)

// mcpProtocolVersion is the MCP protocol version turnd asks for. It is the
// last one with sessions (initialize, Mcp-Session-Id and a standing SSE
// stream): when such a server goes away or forgets the session, the SDK
// ends the session, which is how turnd learns to reconnect and list the
// tools again. Under 2026-07-28 the notification stream of the SDK's
// client ends silently when the server restarts, and turnd would miss
// every later notifications/tools/list_changed. A server that only speaks
// newer versions still negotiates down through initialize.
const mcpProtocolVersion = "2025-11-25"

const (
	// mcpMinBackoff and mcpMaxBackoff bound the wait between attempts to
	// reach an MCP server that is down; it doubles from the first to the
	// second.
	mcpMinBackoff = time.Second
	mcpMaxBackoff = time.Minute

	// MaxMCPTools caps the tools imported from one MCP server; the rest are
	// left out, with a warning.
	MaxMCPTools = 1000

	// metaIdempotencyKey carries {session_id}/{turn_id}/{call_id} in the
	// _meta of every tools/call, the same for every attempt of a call, so
	// that a server can recognise a retry.
	metaIdempotencyKey = "io.turnd/idempotency-key"
)

// mcpReservedHeaders are set by the MCP transport itself.
var mcpReservedHeaders = []string{"Content-Type", "Content-Length", "Accept", "Mcp-Session-Id",
	"Mcp-Protocol-Version", "Last-Event-Id", "Host", "Connection", "Transfer-Encoding"}

// mcpPrefixPattern leaves room for at least one character of the server's
// own tool name within namePattern's 64.
var mcpPrefixPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{0,63}$`)

// mcpSource is one checked mcp entry of the config.
type mcpSource struct {
	label   string // "tools[i]", for config errors and logs
	at      pos
	url     string        // ${VAR} expanded: may hold a secret
	header  http.Header   // ${VAR} expanded: secrets
	stdio   *stdioCommand // instead of url: the server turnd runs
	prefix  string
	trust   bool
	timeout time.Duration
	retry   dispatch.RetryPolicy
	// resources are the templates of the server's tools, by the server's
	// names; caps the server's max_concurrency, shared by its tools.
	resources map[string][]located
	caps      caps
	// projection is the entry's projection: block, for every tool.
	projection budget.Projection
	// approval is the entry's approval policy (or the config's default),
	// for every tool of the server; nil asks for none.
	approval *Approval
}

// key identifies the connection the entry needs: a reload keeps the
// connection of an entry whose key did not change.
func (s *mcpSource) key() string {
	if s.stdio != nil {
		return s.stdio.key()
	}
	var b strings.Builder
	b.WriteString(s.url)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.header {
			if !yield(k) {
				return
			}
		}
	}) {
		b.WriteString("\n" + k + ": " + strings.Join(s.header[k], ","))
	}
	return b.String()
}

// headerTransport adds an MCP server's configured headers to every request
// the SDK sends it.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	for k, v := range t.header {
		r.Header[k] = v
	}
	if r.Header.Get("User-Agent") == "" {
		r.Header.Set("User-Agent", "turnd")
	}
	return t.base.RoundTrip(r)
}

// mcpServer is the connection to one MCP server and the tools it lists,
// kept connected by a goroutine of its own (run) while the server is in the
// Live's current config. See ARCHITECTURE.md, "Tool registries and MCP
// servers".
type mcpServer struct {
	live       *Live
	log        *slog.Logger
	key        string
	url        string // may hold a secret
	safeURL    string // scheme and host only: fit for logs and for the model
	client     *mcp.Client
	httpClient *http.Client
	retries    int           // the transport's stream reconnects
	backoff    time.Duration // the first wait after a failed attempt
	stdio      *stdioCommand // the process to run, for a stdio server
	grace      time.Duration // a stdio server's time to exit (mcpStopGrace)

	refresh  chan struct{} // cap 1: list again, or reconnect now
	first    chan struct{} // closed when the first attempt has ended
	stop     context.CancelFunc
	loopDone chan struct{}
	connMu   sync.Mutex // one connection attempt at a time
	// calls is cancelled by shutdown: it ends the calls in flight, which
	// closing the session would otherwise wait for.
	calls      context.Context
	closeCalls context.CancelFunc
	watchers   sync.WaitGroup // the goroutines waiting for a session's end
	progress   sync.Map       // progress token → progressRoute (mcp_meta.go)

	mu       sync.Mutex
	src      *mcpSource
	sess     *mcp.ClientSession
	tools    []*mcp.Tool // as last listed; kept while disconnected
	listed   []byte      // tools as JSON, to tell a change
	specs    []*Spec
	attempt  chan struct{} // closed when the running (or next) attempt ends
	lastErr  error         // of the last attempt
	retired  bool
	closed   bool
	inflight int

	// A stdio server's process: when it started, and while it is down,
	// when turnd starts it again (the zero time while it runs or starts;
	// a time past while the restart is not yet scheduled).
	started    time.Time
	restarting time.Time
	lastExit   string // how the last process ended, for the log and for calls
}

func newMCPServer(l *Live, src *mcpSource) *mcpServer {
	safe := "(mcp server)"
	if src.stdio != nil {
		safe = src.stdio.name()
	} else if u, err := url.Parse(src.url); err == nil {
		safe = u.Scheme + "://" + u.Host
	}
	s := &mcpServer{
		live:    l,
		key:     src.key(),
		url:     src.url,
		safeURL: safe,
		retries: l.opts.mcpStreamRetries,
		backoff: l.opts.mcpBackoff,
		refresh: make(chan struct{}, 1),
		first:   make(chan struct{}),
		attempt: make(chan struct{}),
		src:     src,
		stdio:   src.stdio,
		grace:   l.opts.mcpStopGrace,
	}
	if s.grace <= 0 {
		s.grace = mcpStopGrace
	}
	if s.backoff <= 0 {
		s.backoff = mcpMinBackoff
	}
	s.calls, s.closeCalls = context.WithCancel(context.Background())
	s.log = l.log.With("mcp_server", safe) // never the URL: it may hold a secret
	base := l.client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	// No overall timeout: the session's notification stream stays open.
	s.httpClient = &http.Client{Transport: &headerTransport{base: base, header: src.header}, CheckRedirect: l.client.CheckRedirect}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "turnd", Version: "1"}, &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{},
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { s.kick() },
		ProgressNotificationHandler: s.onProgress,
	})
	return s
}

// start runs the goroutine that keeps the server connected.
func (s *mcpServer) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.loopDone = make(chan struct{})
	go s.run(ctx)
}

// kick asks the goroutine to list the tools again (reconnecting first if
// the session is gone), now rather than after its backoff.
func (s *mcpServer) kick() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// run is the server's goroutine: it connects and lists the tools, again
// on every kick, and after a backoff while the server is unreachable or
// its process down.
func (s *mcpServer) run(ctx context.Context) {
	defer close(s.loopDone)
	wait := s.backoff
	maxWait := max(mcpMaxBackoff, s.backoff)
	failing := false
	for n := 0; ; n++ {
		err := s.connectAndList(ctx)
		s.logListing(ctx, err, failing, wait)
		if n == 0 {
			close(s.first)
		}
		if ctx.Err() != nil {
			return
		}
		failing = err != nil
		if err == nil {
			if s.stdio == nil {
				wait = s.backoff
			}
			var restart, ok bool
			if wait, restart, ok = s.awaitRefresh(ctx, wait, maxWait); !ok {
				return
			} else if !restart {
				continue
			}
		}
		if !s.pause(ctx, wait) {
			return
		}
		wait = min(2*wait, maxWait)
	}
}

// logListing logs how a listing went where that changed: once per outage
// at warning level, the retries at debug level.
func (s *mcpServer) logListing(ctx context.Context, err error, failing bool, wait time.Duration) {
	switch {
	case ctx.Err() != nil:
	case err == nil && failing:
		s.log.Info("MCP server reachable again")
	case err != nil && !failing:
		s.log.Warn("MCP server unreachable: its tools stay unavailable until it answers; retrying in the background", "err", err, "retry_in", wait)
	case err != nil:
		s.log.Debug("MCP server still unreachable", "err", err, "retry_in", wait)
	}
}

// awaitRefresh waits, after a listing that worked, for a kick: a listing
// to redo, or for a stdio server the exit of its process, which is to
// restart after the wait it returns. ok is false once ctx is done.
func (s *mcpServer) awaitRefresh(ctx context.Context, wait, maxWait time.Duration) (_ time.Duration, restart, ok bool) {
	select {
	case <-ctx.Done():
		return wait, false, false
	case <-s.refresh:
	}
	if s.stdio == nil {
		return wait, false, true
	}
	uptime, running := s.processUptime()
	if running {
		return wait, false, true // a listing to redo, not an exit
	}
	wait = restartWait(wait, s.backoff, maxWait, uptime)
	s.log.Info("MCP server process down; its tools answer tool_unavailable until it runs again", "uptime", uptime.Round(time.Millisecond), "restart_in", wait)
	return wait, true, true
}

// pause waits for wait before the next attempt, and reports false once
// ctx is done. A kick cuts the wait short, but not a stdio server's: a
// process is started again only after the wait, or a server that keeps
// crashing would be started by every call.
func (s *mcpServer) pause(ctx context.Context, wait time.Duration) bool {
	if s.stdio != nil {
		return s.pauseRestart(ctx, wait)
	}
	t := time.NewTimer(wait)
	select {
	case <-ctx.Done():
		t.Stop()
		return false
	case <-t.C:
	case <-s.refresh:
		t.Stop()
	}
	return true
}

// restartWait is the wait before a stdio server's process, which ran for
// uptime, starts again: the backoff reached (wait, doubled after every
// start up to max), or first once a process has run for max.
func restartWait(wait, first, max, uptime time.Duration) time.Duration {
	if uptime >= max {
		return first
	}
	return wait
}

// processUptime reports whether a stdio server's process runs, and for how
// long it ran (or has been running).
func (s *mcpServer) processUptime() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.started), s.sess != nil
}

// pauseRestart waits before a stdio server is started again; calls meanwhile
// fail at once (see acquire). It reports false when ctx ended first.
func (s *mcpServer) pauseRestart(ctx context.Context, wait time.Duration) bool {
	s.mu.Lock()
	s.restarting = time.Now().Add(wait)
	s.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	select {
	case <-s.refresh: // asked meanwhile; the start lists the tools anyway
	default:
	}
	s.mu.Lock()
	s.restarting = time.Time{}
	s.mu.Unlock()
	return true
}

// connectAndList connects if there is no session and lists the tools; a
// change is published to the Live.
func (s *mcpServer) connectAndList(ctx context.Context) error {
	sess, err := s.connect(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	timeout := s.src.timeout
	s.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tools, err := s.list(lctx, sess)
	if err != nil {
		if ctx.Err() == nil {
			// The session may be broken; a fresh one is the way out.
			s.drop(sess)
		}
		return fmt.Errorf("listing the tools: %s", s.redact(err))
	}
	if s.setTools(tools) {
		s.live.rebuild()
	}
	return nil
}

// connect returns the session, opening one if there is none.
func (s *mcpServer) connect(ctx context.Context) (*mcp.ClientSession, error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	sess, timeout, closed := s.sess, s.src.timeout, s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("turnd is closing its MCP sessions")
	}
	if sess != nil {
		return sess, nil
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess, process, err := s.open(cctx)
	return s.adopt(sess, process, err)
}

// open opens a session: over streamable HTTP, or to a process it starts
// (returned too) for a stdio server.
func (s *mcpServer) open(ctx context.Context) (*mcp.ClientSession, *processTransport, error) {
	var transport mcp.Transport = &mcp.StreamableClientTransport{
		Endpoint: s.url, HTTPClient: s.httpClient, MaxRetries: s.retries,
	}
	var process *processTransport
	if s.stdio != nil {
		process = &processTransport{cmd: s.stdio, log: s.log, grace: s.grace}
		transport = process
	}
	sess, err := s.client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: mcpProtocolVersion})
	if err != nil {
		if s.stdio != nil {
			err = fmt.Errorf("starting the server's process: %w", err)
		} else {
			err = fmt.Errorf("connecting: %s", s.redact(err))
		}
	}
	return sess, process, err
}

// adopt records the outcome of an attempt to open a session, and makes a
// session opened the server's, watched until it ends, unless the server
// closed meanwhile.
func (s *mcpServer) adopt(sess *mcp.ClientSession, process *processTransport, err error) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
	close(s.attempt)
	s.attempt = make(chan struct{})
	if err != nil {
		if s.stdio != nil {
			s.restarting = time.Now() // calls fail until the next start
		}
		return nil, err
	}
	if s.closed {
		// Closed while connecting: this session has no use. Close waits
		// for nothing here: no call has it.
		s.mu.Unlock()
		_ = sess.Close()
		s.mu.Lock()
		return nil, errors.New("turnd is closing its MCP sessions")
	}
	s.sess = sess
	if process != nil {
		s.started, s.restarting = time.Now(), time.Time{}
	}
	s.watchers.Add(1)
	go s.watch(sess, process)
	return sess, nil
}

// watch waits for sess, and its process if it has one, to end, then
// forgets it and has the server reconnect (or restart the process) unless
// it is stopping.
func (s *mcpServer) watch(sess *mcp.ClientSession, process *processTransport) {
	defer s.watchers.Done()
	_ = sess.Wait()
	status := ""
	if process != nil {
		// The process exited (or closed its stdout): reap it and
		// what it started. Close returns once the first Close, by
		// whoever called it, has.
		_ = process.conn.Close()
		status = process.conn.status
	}
	s.mu.Lock()
	gone := s.sess == sess
	if gone {
		s.sess = nil
	}
	stopped := s.retired || s.closed
	if process != nil && gone && !stopped {
		// Until the goroutine schedules the restart; a process that
		// was dropped is the goroutine's already.
		s.restarting = time.Now()
	}
	if process != nil && !stopped && s.sess == nil {
		// A call that found the session broken may have dropped it
		// first (drop): how the process ended is still this one's.
		s.lastExit = status
	}
	s.mu.Unlock()
	switch {
	case process == nil && gone:
		s.log.Warn("MCP session ended; reconnecting")
	case process != nil && stopped:
		s.log.Info("MCP server process stopped", "pid", process.conn.cmd.Process.Pid, "status", status)
	case process != nil:
		s.log.Warn("MCP server process exited; turnd starts it again after a backoff", "pid", process.conn.cmd.Process.Pid, "status", status)
	}
	if gone {
		s.kick()
	}
}

// drop closes sess if it is still the server's session.
func (s *mcpServer) drop(sess *mcp.ClientSession) {
	s.mu.Lock()
	if s.sess == sess {
		s.sess = nil
		if s.stdio != nil {
			s.restarting = time.Now()
		}
	}
	s.mu.Unlock()
	_ = sess.Close()
}

// acquire returns the session for a call, which must release it. A live
// server's goroutine is asked to reconnect now and the call waits for that
// attempt; a retired server connects for the call itself.
func (s *mcpServer) acquire(ctx context.Context) (*mcp.ClientSession, error) {
	for {
		s.mu.Lock()
		if s.sess != nil {
			s.inflight++
			sess := s.sess
			s.mu.Unlock()
			return sess, nil
		}
		retired, closed, attempt := s.retired, s.closed, s.attempt
		restarting, lastExit, lastErr := s.restarting, s.lastExit, s.lastErr
		s.mu.Unlock()
		switch {
		case closed:
			return nil, errors.New("turnd is closing its MCP sessions")
		case retired && s.stdio != nil:
			return nil, errors.New("the MCP server's entry left the tool config: turnd no longer runs its command")
		case !restarting.IsZero():
			// Fail now: the entry's retries wait in the dispatcher, and a
			// call outlasting the backoff would hold a turn for a minute.
			why := "its process exited"
			switch {
			case lastErr != nil:
				why = lastErr.Error()
			case lastExit != "":
				why += " (" + lastExit + ")"
			}
			return nil, fmt.Errorf("the MCP server is down: %s; %s", why, describeRestart(restarting, time.Now()))
		case retired:
			if _, err := s.connect(ctx); err != nil {
				return nil, err
			}
			continue
		}
		s.kick()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-attempt:
		}
		s.mu.Lock()
		err := s.lastErr
		up := s.sess != nil
		s.mu.Unlock()
		if !up {
			if err == nil {
				err = errors.New("the session ended")
			}
			return nil, err
		}
	}
}

// release ends a call's use of the session; the last call of a retired
// server closes it.
func (s *mcpServer) release() {
	s.mu.Lock()
	s.inflight--
	var idle *mcp.ClientSession
	if s.retired && s.inflight == 0 {
		idle, s.sess = s.sess, nil
	}
	s.mu.Unlock()
	if idle != nil {
		_ = idle.Close()
	}
}

// retire stops keeping the server connected; its session closes once no
// call uses it.
func (s *mcpServer) retire() {
	// Retired first, so that a call arriving meanwhile connects for itself
	// instead of waiting for the goroutine, which is stopping.
	s.mu.Lock()
	s.retired = true
	s.mu.Unlock()
	s.stop()
	<-s.loopDone
	s.release0(false)
}

// shutdown closes the server for good, calls in flight or not, and waits
// for its goroutines.
func (s *mcpServer) shutdown() {
	s.stop()
	<-s.loopDone
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.closeCalls()
	s.release0(true)
	s.watchers.Wait()
}

func (s *mcpServer) release0(closing bool) {
	s.mu.Lock()
	s.retired = true
	s.closed = s.closed || closing
	var idle *mcp.ClientSession
	if s.inflight == 0 || closing {
		idle, s.sess = s.sess, nil
	}
	s.mu.Unlock()
	if idle != nil {
		_ = idle.Close()
	}
}

// redact is err's text without the server's URL, which may hold a secret.
func (s *mcpServer) redact(err error) string {
	if s.url == "" {
		return err.Error() // a stdio server: no URL
	}
	msg := strings.ReplaceAll(err.Error(), s.url, s.safeURL)
	if u, uerr := url.Parse(s.url); uerr == nil && u.User != nil {
		// net/http quotes a URL with its password masked, as "***".
		if _, has := u.User.Password(); has {
			masked := strings.Replace(s.url, u.User.String()+"@", url.User(u.User.Username()).String()+":***@", 1)
			msg = strings.ReplaceAll(msg, masked, s.safeURL)
		}
	}
	return msg
}
