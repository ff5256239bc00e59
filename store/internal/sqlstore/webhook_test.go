package sqlstore_test

import (
	"reflect"
	"testing"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// An outbox row decodes to its webhook, the body copied away from the
// driver's buffer.
func TestWebhookRow(t *testing.T) {
	t.Parallel()
	body := []byte(`{"event": "turn.settled"}`)
	r := sqlstore.WebhookRow{ID: "w", SessionID: "s", TurnID: "t", URL: "http://x", Event: "turn.settled", Body: body, Attempts: 2, LastError: "503"}
	got := r.Webhook()
	want := turn.Webhook{ID: "w", SessionID: "s", TurnID: "t", URL: "http://x", Event: "turn.settled", Body: []byte(`{"event": "turn.settled"}`), Attempts: 2, LastError: "503"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Webhook() =\n %+v\nwant %+v", got, want)
	}
	body[0] = 'X'
	if got.Body[0] != '{' {
		t.Error("the body shares the row's buffer")
	}
	if n := len(r.Dest(nil, nil, nil, nil)); n != 12 {
		t.Errorf("Dest has %d destinations, want one per column (12)", n)
	}
}
