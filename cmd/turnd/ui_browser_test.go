package main

// The web UI in a real browser: headless Chromium (the system's, driven by
// chromedp) against a real `turnd serve` on loopback. Assertions read the
// page's DOM and the geometry of the timeline's SVG bars, never pixels.
// Screenshots of every page go to $TURND_UI_ARTIFACTS (a test's temporary
// folder when unset).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromium finds the browser: $TURND_CHROMIUM, else chromium on PATH. The
// tests skip without one, saying so, except in CI, where they fail.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TURND_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: CI must run the browser tests (.ci/run installs Debian's chromium package)")
	}
	t.Skip("skipping the browser tests: no chromium on PATH (apt-get install chromium, or set TURND_CHROMIUM)")
	return ""
}

// browser is a headless Chromium for one test; tab opens a page of it.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.NoFirstRun,
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancel()
		cancelAlloc()
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return &browser{t: t, ctx: ctx}
}

// tab is one page of the browser, with what it saw: its requests and the
// dialogs its scripts opened.
type tab struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	reqs    []*network.Request
	dialogs []string
}

func (b *browser) tab(t *testing.T) *tab {
	t.Helper()
	tb := &tab{t: t}
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithListener(func(ev any) {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			tb.reqs = append(tb.reqs, ev.Request)
		case network.EventRequestWillBeSent:
			tb.reqs = append(tb.reqs, ev.Request)
		case *page.EventJavascriptDialogOpening:
			tb.dialogs = append(tb.dialogs, ev.Message)
		case page.EventJavascriptDialogOpening:
			tb.dialogs = append(tb.dialogs, ev.Message)
		}
	}))
	t.Cleanup(cancel)
	tb.ctx = ctx
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	// A dialog blocks the page: dismiss every one (they are recorded).
	go func() {
		for _, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return tb
}

func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression into out (nil: ignored).
func (tb *tab) eval(expr string, out any) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		tb.t.Fatalf("evaluating %s: %v", expr, err)
	}
	if out != nil {
		if err := json.Unmarshal(v, out); err != nil {
			tb.t.Fatalf("evaluating %s: decoding %s: %v", expr, v, err)
		}
	}
}

// waitFor polls a JavaScript condition until it holds, within d.
func (tb *tab) waitFor(what, cond string, d time.Duration) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, d)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(d))); err != nil {
		text, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.getElementById('main').innerText`))
		tb.t.Fatalf("waiting for %s (%s): %v; the page reads:\n%s", what, cond, err, text)
	}
}

// open navigates to a page of the UI.
func (tb *tab) open(url string) {
	tb.t.Helper()
	tb.do("opening "+url, chromedp.Navigate(url))
}

// route changes the page's route without a reload.
func (tb *tab) route(hash string) {
	tb.t.Helper()
	tb.eval(fmt.Sprintf(`location.hash = %q, true`, hash), nil)
}

// screenshot saves the page as name.png in the artifacts folder.
func (tb *tab) screenshot(name string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("TURND_UI_ARTIFACTS")
	if dir == "" {
		dir = tb.t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	return path
}

func (tb *tab) requests() []*network.Request {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return slices.Clone(tb.reqs)
}

func (tb *tab) dialogsSeen() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return slices.Clone(tb.dialogs)
}

// uiTools serves a slow write and a deferred tool for the UI tests; keys
// receives the completion keys the deferred tool is handed.
type uiTools struct {
	url  string
	keys chan string
}

func newUITools(t *testing.T) *uiTools {
	ut := &uiTools{keys: make(chan string, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(150 * time.Millisecond) // a slow tool, as the test's subject
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"output": {"written": true}}`)
	})
	mux.HandleFunc("POST /deferred", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Completion struct{ Key string } `json:"completion"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		ut.keys <- req.Completion.Key
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"pending": {"deadline": "1h", "heartbeat_timeout": "10m"}}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ut.url = srv.URL
	return ut
}

func (ut *uiTools) config(t *testing.T) string {
	return writeFile(t, t.TempDir(), "tools.yaml", `builtin: [echo, sleep]
tools:
  - name: save
    effect: write
    http: {url: "`+ut.url+`/write", timeout: 5s}
  - name: approve
    effect: write
    deferred: true
    http: {url: "`+ut.url+`/deferred", timeout: 5s}
`)
}

// startUI starts a browser, the test tools and a turnd on store b with
// the tools config of config.
func startUI(t *testing.T, b backend, config func(*uiTools) string) (*browser, *uiTools, *proc) {
	t.Helper()
	br := newBrowser(t)
	ut := newUITools(t)
	p := startTurnd(t, procOptions{args: append([]string{"--config", config(ut)}, b.args(t)...)})
	return br, ut, p
}

// TestUITimeline: a turn of two slow reads, a write and a deferred call,
// on both stores: the rows are in call order, the read bars overlap, the
// write starts after both reads ended, the deferred call's wait is open;
// a delivery to its key shows on the page, without a reload, within 2 s.
// The sessions, session and pending pages show the turn too.
func TestUITimeline(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			br, ut, p := startUI(t, b, func(ut *uiTools) string { return ut.config(t) })
			p.must(202, "POST", "/v1/sessions/demo/turns", `{"id":"wave-1","calls":[
				{"id":"read-a","name":"sleep","arguments":{"ms":400}},
				{"id":"read-b","name":"sleep","arguments":{"ms":300}},
				{"id":"write-c","name":"save","arguments":{"path":"notes.txt"}},
				{"id":"approve-d","name":"approve","arguments":{"prompt":"ship it?"}}]}`, "Prefer", "respond-async")
			var key string
			select {
			case key = <-ut.keys:
			case <-time.After(settleTimeout):
				t.Fatal("the deferred tool was never called")
			}

			tb := br.tab(t)
			tb.open(p.base + "/ui/#/turn/demo/wave-1")
			tb.waitFor("the open pending span", `!!document.querySelector('rect[data-kind="pending"][data-call="3"][data-open="true"]') && document.querySelectorAll('rect[data-kind="attempt"]').length >= 4`, 20*time.Second)
			var geo struct {
				Labels   []string
				Bars     map[string]struct{ L, R float64 }
				Deadline bool
				Live     bool
			}
			tb.eval(`(() => {
				const bars = {};
				for (const i of [0, 1, 2, 3]) {
					const r = document.querySelector('rect[data-kind="attempt"][data-call="' + i + '"]').getBoundingClientRect();
					bars[i] = {L: r.left, R: r.right};
				}
				return {
					Labels: [...document.querySelectorAll('.label')].map((e) => e.dataset.callId),
					Bars: bars,
					Deadline: !!document.querySelector('line[data-kind="deadline"][data-call="3"]'),
					Live: !!document.getElementById('live'),
				};
			})()`, &geo)
			if want := []string{"read-a", "read-b", "write-c", "approve-d"}; !slices.Equal(geo.Labels, want) {
				t.Errorf("rows %v, want call order %v", geo.Labels, want)
			}
			a, rb, w := geo.Bars["0"], geo.Bars["1"], geo.Bars["2"]
			if !(a.L < rb.R && rb.L < a.R) {
				t.Errorf("the read bars do not overlap: %+v and %+v", a, rb)
			}
			if w.L < max(a.R, rb.R)-0.5 {
				t.Errorf("the write bar starts at %.1f, before the reads end (%.1f, %.1f)", w.L, a.R, rb.R)
			}
			if !geo.Deadline || !geo.Live {
				t.Errorf("deadline drawn %v, page live %v; want both", geo.Deadline, geo.Live)
			}
			tb.screenshot("timeline-waiting-" + b.name)

			// The other pages, by route (no reload).
			tb.route("#/pending")
			tb.waitFor("the pending row", `!!document.querySelector('#pending tbody tr') && document.querySelector('#pending').innerText.includes('approve-d')`, 10*time.Second)
			var html string
			tb.eval(`document.documentElement.outerHTML`, &html)
			if strings.Contains(html, key) {
				t.Error("the pending page holds the completion key")
			}
			var stray bool
			tb.eval(`/^null$/m.test(document.getElementById('main').innerText)`, &stray)
			if stray {
				t.Error(`the pending page shows a stray "null"`)
			}
			tb.screenshot("pending-" + b.name)
			tb.route("#/session/demo")
			tb.waitFor("the session's turn and ledger", `!!document.querySelector('#turns tr[data-turn="wave-1"]') && document.querySelectorAll('#ledger tbody tr').length > 5`, 10*time.Second)
			tb.screenshot("session-" + b.name)
			tb.route("#/sessions")
			tb.waitFor("the session row", `!!document.querySelector('#sessions tr[data-session="demo"]')`, 10*time.Second)
			var pendingCell string
			tb.eval(`document.querySelector('#sessions tr[data-session="demo"] td:nth-child(3)').textContent`, &pendingCell)
			if pendingCell != "1" {
				t.Errorf("the sessions page shows %q pending for the session, want 1", pendingCell)
			}
			tb.screenshot("sessions-" + b.name)

			// Back to the turn; the delivery shows without a reload.
			tb.route("#/turn/demo/wave-1")
			tb.waitFor("the open pending span", `!!document.querySelector('rect[data-kind="pending"][data-call="3"][data-open="true"]')`, 10*time.Second)
			tb.eval(`window.__sameDocument = true`, nil)
			p.must(200, "POST", "/v1/complete/"+key, `{"output": {"approved": true}}`)
			delivered := time.Now()
			tb.waitFor("the delivery on the page", `!!document.querySelector('rect[data-kind="pending"][data-call="3"][data-open="false"]') && document.getElementById('turn-status').textContent === 'completed' && window.__sameDocument === true`, 2*time.Second)
			t.Logf("%s: the delivery showed on the page %v after it was posted", b.name, time.Since(delivered).Round(time.Millisecond))
			tb.eval(`document.querySelector('.label[data-index="3"]').click()`, nil)
			tb.waitFor("the call's details", `document.getElementById('detail-output').textContent.includes('approved')`, 5*time.Second)
			tb.screenshot("timeline-" + b.name)
		})
	}
}

// TestUIRender128 measures, in the browser, how long drawing the timeline
// of a turn of 128 calls takes (model, DOM and layout): reported, not
// asserted (timing targets are not tests).
func TestUIRender128(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	ut := newUITools(t)
	p := startTurnd(t, procOptions{args: []string{"--config", ut.config(t), "--data", filepath.Join(t.TempDir(), "t.db")}})
	calls := make([]string, 128)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"id":"c%03d","name":"echo","arguments":{"text":"%s"}}`, i, strings.Repeat("x", i*8))
	}
	body := `{"id":"big","calls":[` + strings.Join(calls, ",") + `]}`
	p.must(200, "POST", "/v1/sessions/s128/turns", body)

	tb := br.tab(t)
	tb.open(p.base + "/ui/#/turn/s128/big")
	tb.waitFor("128 settled rows", `document.querySelectorAll('rect[data-kind="attempt"]').length === 128 && !document.getElementById('live')`, 20*time.Second)
	var times []float64
	tb.eval(`(() => {
		const out = [];
		const labels = document.querySelectorAll('.label');
		for (let i = 0; i < 21; i++) {
			labels[i * 6].click(); // selecting a row redraws the whole timeline
			out.push(Number(document.documentElement.dataset.renderMs));
		}
		return out;
	})()`, &times)
	sort.Float64s(times)
	t.Logf("timeline of a 128-call turn rendered in %.1f ms (median of %d redraws; fastest %.1f, slowest %.1f)",
		times[len(times)/2], len(times), times[0], times[len(times)-1])
	tb.screenshot("timeline-128")
}

// xssPayloads are texts that would run script if a page parsed them as
// HTML or followed them as links.
var xssPayloads = []string{
	`<script>window.__xss = 1</script>`,
	`<img src=x onerror="window.__xss = 2; alert(2)">`,
	`javascript:window.__xss = 3`,
	`"><svg onload="window.__xss = 4">`,
}

// TestUIUntrustedText: call ids, tool names, arguments, outputs, errors and
// metadata carrying script payloads are shown as text on every page:
// nothing runs, no element or link comes from them.
func TestUIUntrustedText(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	ut := newUITools(t)
	p := startTurnd(t, procOptions{args: []string{"--config", ut.config(t), "--data", filepath.Join(t.TempDir(), "t.db")}})
	meta, _ := json.Marshal(map[string]any{"id": "xss", "metadata": map[string]string{"note": xssPayloads[1]}, "budget": map[string]any{"limit": 64}})
	p.must(201, "POST", "/v1/sessions", string(meta))
	var calls []map[string]any
	for i, x := range xssPayloads {
		calls = append(calls, map[string]any{"id": x, "name": "echo", "arguments": map[string]string{"text": strings.Repeat(x+" ", 1+i*8)}})
	}
	calls = append(calls, map[string]any{"id": "refused-" + fmt.Sprint(len(calls)), "name": xssPayloads[1], "arguments": map[string]string{"x": xssPayloads[0]}})
	body, _ := json.Marshal(map[string]any{"id": "xss-turn", "calls": calls})
	p.must(200, "POST", "/v1/sessions/xss/turns", string(body))

	tb := br.tab(t)
	tb.open(p.base + "/ui/#/turn/xss/xss-turn")
	tb.waitFor("the settled timeline", `document.querySelectorAll('.label').length === 5 && !document.getElementById('live')`, 20*time.Second)
	for i := range 5 {
		tb.eval(fmt.Sprintf(`document.querySelector('.label[data-index="%d"]').click(), true`, i), nil)
		tb.waitFor("the call's details", fmt.Sprintf(`document.querySelector('#detail h2') && document.querySelector('#detail h2').textContent.startsWith('Call %d ')`, i), 5*time.Second)
		tb.eval(`(() => { const b = document.getElementById('full-output'); if (b) b.click(); return true; })()`, nil)
		tb.waitFor("the full output, if any", `!document.getElementById('full-output') || document.getElementById('full-output').disabled`, 5*time.Second)
	}
	// The longer echoes were projected to the session's 64-byte budget:
	// their rows carry a truncation badge, and the last one opened shows
	// its full output once loaded.
	var badges int
	tb.eval(`document.querySelectorAll('.label .badge.trunc').length`, &badges)
	if badges < 3 {
		t.Errorf("%d truncation badges, want one per truncated output (3)", badges)
	}
	tb.eval(`document.querySelector('.label[data-index="3"]').click(), true`, nil)
	tb.eval(`document.getElementById('full-output').click(), true`, nil)
	tb.waitFor("the full output (1311 bytes of JSON)", `document.getElementById('detail-output').textContent.length === 1311`, 5*time.Second)
	check := func(where string, wantText string) {
		t.Helper()
		var got struct {
			XSS      any
			Scripts  int
			Images   int
			Handlers []string
			Links    []string
			Text     bool
		}
		tb.eval(fmt.Sprintf(`(() => {
			const handlers = [];
			for (const el of document.querySelectorAll('*')) {
				for (const a of el.attributes) if (a.name.startsWith('on')) handlers.push(el.tagName + ' ' + a.name);
			}
			return {
				XSS: window.__xss === undefined ? null : window.__xss,
				Scripts: document.scripts.length,
				Images: document.querySelectorAll('img, svg image, iframe, object, embed').length,
				Handlers: handlers,
				Links: [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')).filter((h) => !h.startsWith('#/') && !h.startsWith('/v1/')),
				Text: document.body.innerText.includes(%q),
			};
		})()`, wantText), &got)
		if got.XSS != nil || got.Scripts != 1 || got.Images != 0 || len(got.Handlers) != 0 || len(got.Links) != 0 {
			t.Errorf("%s: a payload took effect: %+v", where, got)
		}
		if !got.Text {
			t.Errorf("%s: the payload %q is not shown as text", where, wantText)
		}
	}
	check("turn page", xssPayloads[0])
	tb.screenshot("untrusted-turn")
	tb.route("#/session/xss")
	tb.waitFor("the session page", `document.querySelectorAll('#ledger tbody tr').length > 5`, 10*time.Second)
	check("session page", xssPayloads[3])
	tb.route("#/sessions")
	tb.waitFor("the sessions page", `!!document.querySelector('#sessions tr[data-session="xss"]')`, 10*time.Second)
	check("sessions page", "xss")
	if d := tb.dialogsSeen(); len(d) > 0 {
		t.Errorf("the pages opened dialogs: %q", d)
	}
}

// TestUIToken: with API tokens configured the pages ask for one and work
// only once it is entered; every API request, the event stream's included,
// carries it in its Authorization header and none in its URL; it is not
// in the page nor in the server's log.
func TestUIToken(t *testing.T) {
	t.Parallel()
	const token = "ui-test-token-0123456789abcdef0123456789"
	br := newBrowser(t)
	ut := newUITools(t)
	p := startTurnd(t, procOptions{
		args: []string{"--config", ut.config(t), "--data", filepath.Join(t.TempDir(), "t.db")},
		env:  []string{"TURND_API_TOKENS=" + token},
	})
	p.must(200, "POST", "/v1/sessions/tok/turns", `{"id":"t1","calls":[{"id":"c1","name":"echo","arguments":{"text":"hi"}}]}`, "Authorization", "Bearer "+token)
	p.must(401, "GET", "/v1/sessions", nil)

	tb := br.tab(t)
	tb.open(p.base + "/ui/#/sessions")
	tb.waitFor("the token form", `!!document.getElementById('login') && !document.getElementById('sessions')`, 10*time.Second)
	tb.screenshot("token-form")
	tb.eval(fmt.Sprintf(`document.getElementById('token').value = %q, document.getElementById('login').requestSubmit(), true`, token), nil)
	tb.waitFor("the sessions page", `!!document.querySelector('#sessions tr[data-session="tok"]')`, 10*time.Second)
	tb.route("#/turn/tok/t1")
	tb.waitFor("the settled timeline", `document.querySelectorAll('rect[data-kind="attempt"]').length === 1 && !document.getElementById('live')`, 10*time.Second)
	// A reload keeps the token for the tab.
	tb.open(p.base + "/ui/#/session/tok")
	tb.waitFor("the session page", `!!document.querySelector('#turns tr[data-turn="t1"]')`, 10*time.Second)

	var html string
	tb.eval(`document.documentElement.outerHTML`, &html)
	if strings.Contains(html, token) {
		t.Error("the page's HTML holds the token")
	}
	var api, authorized, stream int
	for _, r := range tb.requests() {
		if strings.Contains(r.URL, token) || strings.Contains(r.URLFragment, token) {
			t.Errorf("a request carries the token in its URL: %s", r.URL)
		}
		if !strings.Contains(r.URL, "/v1/") {
			continue
		}
		api++
		if auth, _ := r.Headers["Authorization"].(string); auth == "Bearer "+token {
			authorized++
			if u, err := url.Parse(r.URL); err == nil && strings.HasSuffix(u.Path, "/events") {
				stream++
			}
		}
	}
	// The first request, before the form, had no token.
	if api < 5 || authorized != api-1 || stream == 0 {
		t.Errorf("%d API requests, %d with the token (want all but the first), %d of them event streams (want some)", api, authorized, stream)
	}
	if strings.Contains(p.stderr.String(), token) {
		t.Error("the server's log holds the token")
	}
}

// TestUISessionsPaging: the sessions page pages through 250 sessions,
// newest first, each once, on both stores.
func TestUISessionsPaging(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			br := newBrowser(t)
			p := startTurnd(t, procOptions{args: b.args(t)})
			var want []string
			for i := range 250 {
				id := fmt.Sprintf("s%03d", i)
				p.must(201, "POST", "/v1/sessions", `{"id":"`+id+`"}`)
				want = append(want, id)
			}
			slices.Reverse(want)

			tb := br.tab(t)
			tb.open(p.base + "/ui/#/sessions")
			var got []string
			for pageNo := 0; ; pageNo++ {
				if pageNo > 10 {
					t.Fatal("the sessions page does not end")
				}
				prev := "" // the previous page's first row
				if len(got) > 0 {
					prev = got[max(0, len(got)-50)]
				}
				tb.waitFor("a page of sessions", fmt.Sprintf(`document.querySelectorAll('#sessions tbody tr').length > 0 && document.querySelector('#sessions tbody tr').dataset.session !== %q && (!!document.getElementById('next') || !!document.getElementById('last'))`, prev), 10*time.Second)
				var rows []string
				var last bool
				tb.eval(`[...document.querySelectorAll('#sessions tbody tr')].map((r) => r.dataset.session)`, &rows)
				tb.eval(`!document.getElementById('next')`, &last)
				got = append(got, rows...)
				if pageNo == 1 {
					tb.screenshot("sessions-page-2-" + b.name)
				}
				if last {
					break
				}
				tb.eval(`document.getElementById('next').click(), true`, nil)
			}
			if !slices.Equal(got, want) {
				t.Errorf("paged %d sessions: %v\nwant %d, newest first", len(got), got, len(want))
			}
		})
	}
}

// TestServeUIFlag: the UI is served at /ui/ with its security headers,
// which API answers do not carry; --ui=false turns it off.
func TestServeUIFlag(t *testing.T) {
	t.Parallel()
	on := startTurnd(t, procOptions{args: []string{"--data", filepath.Join(t.TempDir(), "t.db")}})
	resp, body := on.do("GET", "/ui/", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `<script type="module" src="app.js">`) {
		t.Fatalf("GET /ui/: %d %s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("GET /ui/: Content-Security-Policy %q", csp)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("GET /ui/: X-Content-Type-Options %q", resp.Header.Get("X-Content-Type-Options"))
	}
	if resp, _ := on.do("GET", "/ui", nil); resp.Request.URL.Path != "/ui/" {
		t.Errorf("GET /ui ends at %s, want a redirect to /ui/", resp.Request.URL.Path)
	}
	if resp, _ := on.do("GET", "/v1/sessions", nil); resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != "" {
		t.Errorf("GET /v1/sessions: %d, Content-Security-Policy %q (API answers are left as they were)", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}

	off := startTurnd(t, procOptions{args: []string{"--ui=false", "--data", filepath.Join(t.TempDir(), "t.db")}})
	if resp, _ := off.do("GET", "/ui/", nil); resp.StatusCode != 404 {
		t.Errorf("GET /ui/ with --ui=false: %d, want 404", resp.StatusCode)
	}
}
