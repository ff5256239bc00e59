package main

import (
	"strings"
	"testing"
	"time"
)

// resourceConfig is a slow keyed write (150 ms, resource file:{/path}) and
// a capped read (max_concurrency 1).
func resourceConfig(t *testing.T, ut *uiTools) string {
	return writeFile(t, t.TempDir(), "tools.yaml", `builtin: [echo]
tools:
  - name: edit
    effect: write
    resource: "file:{/path}"
    input_schema: {type: object, required: [path], properties: {path: {type: string}}}
    http: {url: "`+ut.url+`/write", timeout: 5s}
  - name: fetch
    effect: read
    max_concurrency: 1
    http: {url: "`+ut.url+`/write", timeout: 5s}
`)
}

// wait is a wait bar as the page draws it.
type wait struct {
	Call  int
	On    string
	Title string
	L, R  float64
}

// TestUIResources: writes on different paths are drawn side by side, the
// one sharing a path waits (its wait bar says for which call and path),
// the capped reads queue (for a max_concurrency place), and the labels
// show each call's resources. On both stores.
func TestUIResources(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			br, _, p := startUI(t, b, func(ut *uiTools) string { return resourceConfig(t, ut) })
			p.must(200, "POST", "/v1/sessions/res/turns", `{"id":"edits","calls":[
				{"id":"f1","name":"fetch","arguments":{}},
				{"id":"f2","name":"fetch","arguments":{}},
				{"id":"a1","name":"edit","arguments":{"path":"a.txt"}},
				{"id":"b1","name":"edit","arguments":{"path":"b.txt"}},
				{"id":"a2","name":"edit","arguments":{"path":"a.txt"}}]}`)

			tb := br.tab(t)
			tb.open(p.base + "/ui/#/turn/res/edits")
			tb.waitFor("the settled timeline", `document.querySelectorAll('rect[data-kind="attempt"]').length === 5 && !document.getElementById('live')`, 20*time.Second)
			var a1, b1, a2 []segment
			tb.eval(segmentsJS(2), &a1)
			tb.eval(segmentsJS(3), &b1)
			tb.eval(segmentsJS(4), &a2)
			// 150 ms writes on an axis of about half a second: tens of px.
			if b1[0].L > a1[0].R-10 {
				t.Errorf("b1 (%.1f–%.1f) does not run beside a1 (%.1f–%.1f)", b1[0].L, b1[0].R, a1[0].L, a1[0].R)
			}
			if a2[0].L < a1[0].R-0.5 {
				t.Errorf("a2 starts at %.1f, before a1 ends at %.1f", a2[0].L, a1[0].R)
			}
			var waits []wait
			tb.eval(`[...document.querySelectorAll('rect[data-kind="wait"]')].map((e) => { const r = e.getBoundingClientRect();
				return {Call: Number(e.dataset.call), On: e.dataset.on, Title: e.querySelector('title').textContent, L: r.left, R: r.right}; })`, &waits)
			var sawPath, sawCap bool
			for _, w := range waits {
				switch {
				case w.Call == 4 && w.On == "resource":
					sawPath = strings.Contains(w.Title, "for a1 on file:a.txt") && w.R-w.L > 10
				case w.Call == 1 && w.On == "cap":
					sawCap = strings.Contains(w.Title, "for a max_concurrency place of fetch") && w.R-w.L > 10
				case w.On == "cap" && w.Call > 1:
					t.Errorf("a wait for a cap on call %d, whose tool has none: %+v", w.Call, w)
				}
			}
			if !sawPath || !sawCap {
				t.Errorf("wait bars %+v: want a2's on a1's path and a fetch's on the cap", waits)
			}
			var title, badge string
			tb.eval(`document.querySelector('rect[data-kind="attempt"][data-call="2"] title').textContent`, &title)
			if !strings.Contains(title, "ran at once with b1") {
				t.Errorf("a1's bar is titled %q", title)
			}
			tb.eval(`document.querySelector('.label[data-index="4"] .badge.res').textContent`, &badge)
			if badge != "file:a.txt" {
				t.Errorf("a2's resource badge reads %q", badge)
			}
			tb.screenshot("timeline-resources-" + b.name)
		})
	}
}
