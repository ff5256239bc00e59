package postgres

import (
	"time"

	"github.com/turnd/turnd/turn"
)

// sampleCommit carries one line, one result and one output.
func sampleCommit() turn.Commit {
	now := time.Now()
	return turn.Commit{Key: turn.TurnKey{SessionID: "s", TurnID: "t"}, LeaseOwner: "o", LeaseUntil: now,
		Lines:   []turn.Line{{Kind: "x", At: now}},
		Results: []turn.Result{{Index: 0, CallID: "c", Status: "ok"}},
		Outputs: []turn.Output{{ID: "o", Data: []byte("x"), CreatedAt: now}}}
}
