package turn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Listings: sessions newest first, a session's turns newest first, and the
// calls parked across sessions, each paged by a Cursor. The stores read
// every page by an index (migration 11), so a page costs the same whatever
// the number of rows before it.

// Cursor is a position in a listing: the creation time and id of the last
// row of the previous page. The zero Cursor starts at the newest row.
type Cursor struct {
	At time.Time
	ID string
}

// IsZero reports whether c is the start of a listing.
func (c Cursor) IsZero() bool { return c.At.IsZero() && c.ID == "" }

// cursorJSON is a cursor's encoded form, before base64.
type cursorJSON struct {
	At int64  `json:"a"`
	ID string `json:"i"`
}

// String is the cursor as an opaque token (URL-safe base64 of JSON): the
// value of a listing's next_after and after.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	b, _ := json.Marshal(cursorJSON{At: c.At.UnixMicro(), ID: c.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCursor reads a token String made; "" is the zero Cursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, invalid("after", "is not a cursor this server returned")
	}
	var c cursorJSON
	if err := json.Unmarshal(b, &c); err != nil || c.At == 0 {
		return Cursor{}, invalid("after", "is not a cursor this server returned")
	}
	return Cursor{At: time.UnixMicro(c.At).UTC(), ID: c.ID}, nil
}

// SessionSummary is a session as listed: the session, how many turns it
// has, how many of its calls are parked now, and the time of its newest
// ledger line (its creation time when it has none).
type SessionSummary struct {
	Session
	Turns        int64
	Pending      int64
	LastActivity time.Time
}

// TurnSummary is a turn as listed, without its calls' results.
type TurnSummary struct {
	SessionID string
	ID        string
	Status    Status
	Calls     int
	Pending   int64
	CreatedAt time.Time
	SettledAt time.Time // zero while not settled
}

// ParkedCall is a call parked on a completion key, as listed: never the
// key, nor its hash.
type ParkedCall struct {
	SessionID         string
	TurnID            string
	CallIndex         int
	CallID            string
	CallName          string
	Deadline          time.Time
	HeartbeatTimeout  time.Duration
	HeartbeatDeadline time.Time // zero without a heartbeat clock
	OnTimeout         string
	OnCancel          string
	CreatedAt         time.Time
	// Reason is the completion's (ReasonApproval for a call waiting for a
	// decision).
	Reason string
}

// Cursor is the call's position in the pending listing.
func (p ParkedCall) Cursor() Cursor {
	return Cursor{At: p.CreatedAt, ID: ParkedID(p.SessionID, p.TurnID, p.CallIndex)}
}

// ParkedID is the id the pending listing orders a call by after its
// creation time: session id, turn id and call index, NUL-separated (ids
// never hold a NUL), which sorts as the three columns do.
func ParkedID(sessionID, turnID string, index int) string {
	return fmt.Sprintf("%s\x00%s\x00%d", sessionID, turnID, index)
}

// SplitParkedID is ParkedID's inverse; ok is false for an id it did not
// make.
func SplitParkedID(id string) (sessionID, turnID string, index int, ok bool) {
	parts := strings.Split(id, "\x00")
	if len(parts) != 3 {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil || n < 0 {
		return "", "", 0, false
	}
	return parts[0], parts[1], n, true
}

// Lister is the part of a Store that lists. Pages are newest first, by
// (created_at, id) descending; a page starts after the cursor (strictly
// older), and an empty one ends the listing.
type Lister interface {
	// ListSessions returns up to limit sessions created before after (all,
	// from the newest, for the zero Cursor).
	ListSessions(ctx context.Context, after Cursor, limit int) ([]SessionSummary, error)
	// ListTurns returns up to limit turns of the session before after,
	// only those in status when it is not empty. An unknown session
	// yields none.
	ListTurns(ctx context.Context, sessionID string, after Cursor, limit int, status Status) ([]TurnSummary, error)
	// ListParked returns up to limit completions in status pending across
	// sessions, before after (see ParkedCall.Cursor for their ids).
	ListParked(ctx context.Context, after Cursor, limit int) ([]ParkedCall, error)
}

// maxListLimit bounds a listing page (the API's pages hold up to 500 rows
// and read one more to tell whether another page follows).
const maxListLimit = 1000

func checkList(limit int) error {
	if limit <= 0 || limit > maxListLimit {
		return invalid("limit", "must be 1-%d", maxListLimit)
	}
	return nil
}

// ListSessions returns a page of sessions, newest first.
func (s *Service) ListSessions(ctx context.Context, after Cursor, limit int) ([]SessionSummary, error) {
	if err := checkList(limit); err != nil {
		return nil, err
	}
	out, err := s.store.ListSessions(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	return out, nil
}

// ListTurns returns a page of a session's turns, newest first; ErrNotFound
// for an unknown session.
func (s *Service) ListTurns(ctx context.Context, sessionID string, after Cursor, limit int, status Status) ([]TurnSummary, error) {
	if !validPathID(sessionID) {
		return nil, ErrNotFound
	}
	if err := checkList(limit); err != nil {
		return nil, err
	}
	switch status {
	case "", StatusRunning, StatusWaiting, StatusCompleted, StatusFailed, StatusCancelled:
	default:
		return nil, invalid("status", "must be running, waiting, completed, failed or cancelled")
	}
	if _, err := s.GetSession(ctx, sessionID); err != nil {
		return nil, err
	}
	out, err := s.store.ListTurns(ctx, sessionID, after, limit, status)
	if err != nil {
		return nil, fmt.Errorf("listing turns: %w", err)
	}
	return out, nil
}

// ListParked returns a page of the calls parked across sessions, newest
// first.
func (s *Service) ListParked(ctx context.Context, after Cursor, limit int) ([]ParkedCall, error) {
	if err := checkList(limit); err != nil {
		return nil, err
	}
	if _, _, _, ok := SplitParkedID(after.ID); !after.IsZero() && !ok {
		return nil, invalid("after", "is not a cursor of the pending listing")
	}
	out, err := s.store.ListParked(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing parked calls: %w", err)
	}
	return out, nil
}
