package main

import (
	"testing"
	"time"
)

// TestUIProgress: a parked call's progress, posted by its sender, shows on
// the timeline (its row's badge and its details) without a reload, and
// goes once the call has its result.
func TestUIProgress(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			br, ut, p := startUI(t, b, func(ut *uiTools) string { return ut.config(t) })
			p.must(202, "POST", "/v1/sessions/demo/turns", `{"id":"wave-1","calls":[{"id":"approve-d","name":"approve","arguments":{"prompt":"ship it?"}}]}`, "Prefer", "respond-async")
			var key string
			select {
			case key = <-ut.keys:
			case <-time.After(settleTimeout):
				t.Fatal("the deferred tool was never called")
			}
			tb := br.tab(t)
			tb.open(p.base + "/ui/#/turn/demo/wave-1")
			tb.waitFor("the open pending span", `!!document.querySelector('rect[data-kind="pending"][data-call="0"][data-open="true"]')`, 20*time.Second)
			p.must(200, "POST", "/v1/complete/"+key+"/progress", `{"progress": 2, "total": 5, "message": "2 of 5 reviewers"}`)
			tb.waitFor("the progress badge", `(document.querySelector('.badge.progress') || {}).textContent === '2/5 (40%)'`, 5*time.Second)
			tb.eval(`document.querySelector('.label[data-index="0"]').click()`, nil)
			tb.waitFor("the progress in the details", `(document.getElementById('detail-progress') || {}).textContent === '2/5 (40%) · 2 of 5 reviewers'`, 5*time.Second)
			tb.screenshot("timeline-progress-" + b.name)
			p.must(200, "POST", "/v1/complete/"+key, `{"output": {"approved": true}}`)
			tb.waitFor("the result in place of the progress", `document.getElementById('turn-status').textContent === 'completed' && !document.querySelector('.badge.progress')`, 5*time.Second)
		})
	}
}
