package sqlstore_test

import (
	"math"
	"testing"
	"time"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

func TestCursors(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	if got := sqlstore.CursorTime(turn.Cursor{}); !got.Equal(sqlstore.ListStart) {
		t.Errorf("CursorTime of the zero cursor = %v", got)
	}
	if got := sqlstore.CursorTime(turn.Cursor{At: at, ID: "x"}); !got.Equal(at) {
		t.Errorf("CursorTime = %v, want %v", got, at)
	}
	if !sqlstore.ListStart.After(time.Now().AddDate(1000, 0, 0)) {
		t.Errorf("ListStart %v is not after every row", sqlstore.ListStart)
	}

	gotAt, sid, tid, idx, err := sqlstore.ParkedCursor(turn.Cursor{})
	if err != nil || !gotAt.Equal(sqlstore.ListStart) || sid != "" || tid != "" || idx != math.MaxInt32 {
		t.Errorf("ParkedCursor(zero) = %v %q %q %d %v", gotAt, sid, tid, idx, err)
	}
	c := turn.ParkedCall{SessionID: "s", TurnID: "t", CallIndex: 4, CreatedAt: at}.Cursor()
	gotAt, sid, tid, idx, err = sqlstore.ParkedCursor(c)
	if err != nil || !gotAt.Equal(at) || sid != "s" || tid != "t" || idx != 4 {
		t.Errorf("ParkedCursor(%v) = %v %q %q %d %v", c, gotAt, sid, tid, idx, err)
	}
	if _, _, _, _, err := sqlstore.ParkedCursor(turn.Cursor{At: at, ID: "session"}); err == nil {
		t.Error("ParkedCursor took a session cursor")
	}
}

func TestLastActivity(t *testing.T) {
	t.Parallel()
	created := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := sqlstore.LastActivity(created, 0, false); !got.Equal(created) {
		t.Errorf("without lines: %v", got)
	}
	last := created.Add(90 * time.Second)
	got := sqlstore.LastActivity(created, last.UnixMicro(), true)
	if !got.Equal(last) || got.Location() != time.UTC {
		t.Errorf("with a line: %v, want %v in UTC", got, last)
	}
}
