package postgres

import (
	"time"

	"github.com/turnd/turnd/turn"
)

// sampleCommit carries one line, one result, one output, one park and a
// webhook.
func sampleCommit() turn.Commit {
	now := time.Now()
	return turn.Commit{Key: turn.TurnKey{SessionID: "s", TurnID: "t"}, LeaseOwner: "o", LeaseUntil: now,
		Lines:   []turn.Line{{Kind: "x", At: now}},
		Results: []turn.Result{{Index: 0, CallID: "c", Status: "ok"}},
		Outputs: []turn.Output{{ID: "o", Data: []byte("x"), CreatedAt: now}},
		Parks:   []turn.Park{{KeyHash: [32]byte{1}, Deadline: now, HeartbeatTimeout: time.Second}},
		Webhook: sampleWebhook(now)}
}

func sampleWebhook(now time.Time) *turn.Webhook {
	return &turn.Webhook{ID: "msg_1", URL: "https://x.test/", Event: "turn.settled", Body: []byte(`{}`), CreatedAt: now}
}

// sampleResolve carries one item with a result and an output, one line,
// one settle line and a settle webhook.
func sampleResolve() turn.ResolveBatch {
	now := time.Now()
	return turn.ResolveBatch{Key: turn.TurnKey{SessionID: "s", TurnID: "t"},
		Items: []turn.Resolution{{KeyHash: [32]byte{1}, Expect: turn.CompletionPending, Status: turn.CompletionCompleted,
			Payload: []byte(`{}`), Result: turn.Result{Index: 0, CallID: "c", Status: "ok"},
			Outputs: []turn.Output{{ID: "o", Data: []byte("x"), CreatedAt: now}}}},
		Lines:         []turn.Line{{Kind: "x", At: now}},
		SettleStatus:  turn.StatusCompleted,
		SettleLines:   []turn.Line{{Kind: "y", At: now}},
		SettleWebhook: sampleWebhook(now),
		Now:           now}
}
