package turn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestWebhookBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt  int
		low, top time.Duration
	}{
		{1, 500 * time.Millisecond, time.Second},
		{2, time.Second, 2 * time.Second},
		{5, 8 * time.Second, 16 * time.Second},
		{12, 1024 * time.Second, 2048 * time.Second}, // below the ceiling
		{14, 30 * time.Minute, time.Hour},            // capped
		{1000, 30 * time.Minute, time.Hour},          // no overflow
	}
	for _, tt := range tests {
		for range 50 {
			d := webhookBackoff(tt.attempt, time.Second, time.Hour)
			if d < tt.low || d > tt.top {
				t.Fatalf("attempt %d: %v, want within [%v, %v]", tt.attempt, d, tt.low, tt.top)
			}
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"120", 2 * time.Minute},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"99999999999999999", time.Hour},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), time.Hour},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.header, now, time.Hour); got != tt.want {
			t.Errorf("Retry-After %q: %v, want %v", tt.header, got, tt.want)
		}
	}
}

func TestAttemptError(t *testing.T) {
	t.Parallel()
	secret := "https://hooks.test/x?token=s3cret"
	tests := []struct {
		a    attempt
		want string
	}{
		{attempt{status: 503}, "HTTP 503 Service Unavailable"},
		{attempt{status: 302}, "HTTP 302 Found (redirects are not followed)"},
		{attempt{err: &url.Error{Op: "Post", URL: secret, Err: errors.New("connection refused")}}, "connection refused"},
		{attempt{err: &url.Error{Op: "Post", URL: secret, Err: context.DeadlineExceeded}}, "no response within 10s"},
		{attempt{err: errors.New(strings.Repeat("é", 300))}, strings.Repeat("é", maxLastError/2)},
	}
	for _, tt := range tests {
		if got := attemptError(tt.a, 10*time.Second); got != tt.want {
			t.Errorf("attemptError(%+v) = %q, want %q", tt.a, got, tt.want)
		}
	}
}

func TestSettledWebhookPayload(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	k := TurnKey{SessionID: "s1", TurnID: "t1"}
	if w := settledWebhook("", k, StatusCompleted, at); w != nil {
		t.Fatalf("webhook without a callback URL: %+v", w)
	}
	w := settledWebhook("https://hooks.test/", k, StatusFailed, at)
	want := `{"type":"turn.settled","timestamp":"2030-01-02T03:04:05.123456Z","data":{"session_id":"s1","turn_id":"t1","status":"failed","settled_at":"2030-01-02T03:04:05.123456Z"}}`
	if string(w.Body) != want {
		t.Errorf("body\n got %s\nwant %s", w.Body, want)
	}
	if !strings.HasPrefix(w.ID, "msg_") || w.Event != EventTurnSettled || w.URL != "https://hooks.test/" ||
		!w.CreatedAt.Equal(at) || !w.NextAttemptAt.Equal(at) || fmt.Sprint(w.SessionID, w.TurnID) != "s1t1" {
		t.Errorf("webhook %+v", w)
	}
}
