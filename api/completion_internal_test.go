package api

import (
	"net/http/httptest"
	"testing"
)

// TestDeliveredAnswersAsWriteJSON holds the delivery answers written from
// the table to what writeJSON writes for {"status": status}: the same
// status line, header and bytes, for every status in the table and for
// one not in it (which writeJSON writes).
func TestDeliveredAnswersAsWriteJSON(t *testing.T) {
	t.Parallel()
	statuses := []string{"not_in_the_table"}
	for s := range deliveredAnswers {
		statuses = append(statuses, s)
	}
	if len(statuses) != 3 {
		t.Fatalf("the table holds %d answers, want accepted and already_completed", len(statuses)-1)
	}
	for _, status := range statuses {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeDelivered(got, status)
		writeJSON(want, 200, map[string]string{"status": status})
		if got.Code != want.Code || got.Body.String() != want.Body.String() {
			t.Errorf("%s: answered %d %q, writeJSON writes %d %q", status, got.Code, got.Body, want.Code, want.Body)
		}
		if g, w := got.Header().Get("Content-Type"), want.Header().Get("Content-Type"); g != w {
			t.Errorf("%s: Content-Type %q, writeJSON sets %q", status, g, w)
		}
	}
}
