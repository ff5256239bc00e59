package sqlstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

func TestWrap(t *testing.T) {
	t.Parallel()
	cause := errors.New("driver said no")
	tests := []struct {
		kind      error
		keepCause bool
	}{
		{nil, true},
		{turn.ErrNotFound, false},
		{turn.ErrSessionExists, false},
		{turn.ErrTurnExists, false},
		{turn.ErrUnavailable, true},
		{turn.ErrRejected, true},
	}
	for _, tt := range tests {
		got := sqlstore.Wrap("doing it", cause, func(error) error { return tt.kind })
		if tt.kind != nil && !errors.Is(got, tt.kind) {
			t.Errorf("Wrap(kind %v) = %v, not that kind", tt.kind, got)
		}
		if errors.Is(got, cause) != tt.keepCause {
			t.Errorf("Wrap(kind %v) = %v: keeps the cause %v, want %v", tt.kind, got, !tt.keepCause, tt.keepCause)
		}
		if !strings.HasPrefix(got.Error(), "doing it: ") {
			t.Errorf("Wrap(kind %v) = %q, without what was being done", tt.kind, got)
		}
	}
	if sqlstore.Wrap("x", nil, func(error) error { panic("a nil error classified") }) != nil {
		t.Error("Wrap of a nil error is not nil")
	}
}

func TestCollect(t *testing.T) {
	t.Parallel()
	notFound := func(error) error { return turn.ErrNotFound }
	collect := func(rows []int) ([]int, error) {
		if rows == nil {
			return nil, errors.New("no rows to read")
		}
		return rows, nil
	}
	if got, err := sqlstore.Collect("reading", []int{1, 2}, nil, collect, notFound); err != nil || len(got) != 2 {
		t.Errorf("Collect = %v, %v", got, err)
	}
	if _, err := sqlstore.Collect("reading", []int{1}, errors.New("query failed"), collect, notFound); !errors.Is(err, turn.ErrNotFound) || !strings.HasPrefix(err.Error(), "reading: ") {
		t.Errorf("a failed query: %v", err)
	}
	if _, err := sqlstore.Collect[[]int, int]("reading", nil, nil, collect, notFound); !errors.Is(err, turn.ErrNotFound) {
		t.Errorf("a failed read: %v", err)
	}
}
