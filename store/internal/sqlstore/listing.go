package sqlstore

import (
	"fmt"
	"math"
	"time"

	"github.com/turnd/turnd/turn"
)

// ListStart is the cursor time of a listing's first page: after every row.
var ListStart = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// CursorTime is the creation time a page after c starts below: c's, or
// ListStart for the zero Cursor.
func CursorTime(c turn.Cursor) time.Time {
	if c.IsZero() {
		return ListStart
	}
	return c.At
}

// ParkedCursor splits a cursor of the pending listing into the columns that
// listing orders by (created_at, session_id, turn_id, call_idx); the zero
// Cursor is after every row. A cursor whose id turn.ParkedID did not make
// is an error.
func ParkedCursor(c turn.Cursor) (at time.Time, sessionID, turnID string, index int, err error) {
	if c.IsZero() {
		return ListStart, "", "", math.MaxInt32, nil
	}
	sessionID, turnID, index, ok := turn.SplitParkedID(c.ID)
	if !ok {
		return time.Time{}, "", "", 0, fmt.Errorf("the cursor's id %q is not a parked call's", c.ID)
	}
	return c.At, sessionID, turnID, index, nil
}

// LastActivity is a listed session's last activity: the time of its newest
// ledger line (lastMicros, when it has one: ok), else its creation time.
func LastActivity(created time.Time, lastMicros int64, ok bool) time.Time {
	if !ok {
		return created
	}
	return time.UnixMicro(lastMicros).UTC()
}
