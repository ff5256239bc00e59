package codec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/turnd/turnd/store/internal/codec"
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
		got := codec.Wrap("doing it", cause, func(error) error { return tt.kind })
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
	if codec.Wrap("x", nil, func(error) error { panic("a nil error classified") }) != nil {
		t.Error("Wrap of a nil error is not nil")
	}
}
