package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// Wire types: snake_case JSON, times RFC 3339 UTC.

type sessionRequest struct {
	ID          *string         `json:"id"`
	Tools       []string        `json:"tools"`
	Budget      *budgetWire     `json:"budget"`
	CallbackURL string          `json:"callback_url"`
	Metadata    json.RawMessage `json:"metadata"`
	Approval    json.RawMessage `json:"approval"`
}

type budgetWire struct {
	Limit     *int     `json:"limit,omitempty"`
	MaxLines  *int     `json:"max_lines,omitempty"`
	Mode      string   `json:"mode,omitempty"`
	Window    string   `json:"window,omitempty"`
	HeadShare *float64 `json:"head_share,omitempty"`
	Patterns  []string `json:"patterns,omitempty"`
	TurnLimit *int     `json:"turn_limit,omitempty"`
}

type sessionWire struct {
	ID          string          `json:"id"`
	Tools       []string        `json:"tools"`
	Budget      budgetOut       `json:"budget"`
	CallbackURL *string         `json:"callback_url"`
	Metadata    json.RawMessage `json:"metadata"`
	CreatedAt   time.Time       `json:"created_at"`
	// Approval is the session's own approval policy, absent for none.
	Approval *tool.Approval `json:"approval,omitempty"`
}

type budgetOut struct {
	Limit     int     `json:"limit"`
	MaxLines  int     `json:"max_lines"`
	Mode      string  `json:"mode"`
	Window    string  `json:"window"`
	HeadShare float64 `json:"head_share"`
	// Absent when not set, so that a session that sets neither reads as
	// it always has.
	Patterns  []string `json:"patterns,omitempty"`
	TurnLimit int      `json:"turn_limit,omitempty"`
}

func toSessionWire(s turn.Session) sessionWire {
	b := s.Budget.WithDefaults()
	out := sessionWire{
		ID:    s.ID,
		Tools: s.Tools,
		Budget: budgetOut{
			Limit: b.Limit, MaxLines: b.MaxLines, Mode: string(b.Mode), Window: string(b.Window), HeadShare: b.HeadShare,
			Patterns: b.Patterns, TurnLimit: b.TurnLimit,
		},
		Metadata:  s.Metadata,
		CreatedAt: s.CreatedAt.UTC(),
		Approval:  s.Approval,
	}
	out.CallbackURL = strPtr(s.CallbackURL)
	out.Metadata = rawOr(out.Metadata, "null")
	return out
}

func (b *budgetWire) config(base budget.Config) budget.Config {
	c := base
	if b.Limit != nil {
		c.Limit = *b.Limit
	}
	if b.MaxLines != nil {
		c.MaxLines = *b.MaxLines
	}
	if b.Mode != "" {
		c.Mode = budget.Mode(b.Mode)
	}
	if b.Window != "" {
		c.Window = budget.Window(b.Window)
	}
	if b.HeadShare != nil {
		c.HeadShare = *b.HeadShare
	}
	if b.Patterns != nil {
		c.Patterns = b.Patterns
	}
	if b.TurnLimit != nil {
		c.TurnLimit = *b.TurnLimit
	}
	return c
}

type turnRequest struct {
	ID            string     `json:"id"`
	Calls         []callWire `json:"calls"`
	Mode          string     `json:"mode"`
	FailurePolicy string     `json:"failure_policy"`
}

type callWire struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type turnWire struct {
	ID            string       `json:"id"`
	SessionID     string       `json:"session_id"`
	Status        string       `json:"status"`
	Mode          string       `json:"mode"`
	FailurePolicy string       `json:"failure_policy"`
	CreatedAt     time.Time    `json:"created_at"`
	SettledAt     *time.Time   `json:"settled_at"`
	Results       []resultWire `json:"results"`
}

type resultWire struct {
	CallID        string          `json:"call_id"`
	Name          string          `json:"name"`
	Status        string          `json:"status"`
	Output        json.RawMessage `json:"output"`
	Error         *turn.CallError `json:"error,omitempty"`
	Truncated     bool            `json:"truncated"`
	OriginalBytes int64           `json:"original_bytes"`
	OriginalLines int64           `json:"original_lines"`
	OutputID      *string         `json:"output_id,omitempty"`
	Attempts      int             `json:"attempts"`
	StartedAt     *time.Time      `json:"started_at"`
	FinishedAt    *time.Time      `json:"finished_at"`
	ReplayedFrom  *string         `json:"replayed_from,omitempty"`
}

func toTurnWire(t turn.Turn) turnWire {
	out := turnWire{
		ID:            t.ID,
		SessionID:     t.SessionID,
		Status:        string(t.Status),
		Mode:          string(t.Mode),
		FailurePolicy: string(t.FailurePolicy),
		CreatedAt:     t.CreatedAt.UTC(),
		SettledAt:     timePtr(t.SettledAt),
		Results:       make([]resultWire, 0, len(t.Results)),
	}
	for _, r := range t.Results {
		rw := resultWire{
			CallID:        r.CallID,
			Name:          r.Name,
			Status:        string(r.Status),
			Output:        r.Output,
			Error:         r.Error,
			Truncated:     r.Truncated,
			OriginalBytes: r.OriginalBytes,
			OriginalLines: r.OriginalLines,
			Attempts:      r.Attempts,
			StartedAt:     timePtr(r.StartedAt),
			FinishedAt:    timePtr(r.FinishedAt),
		}
		rw.Output = rawOr(rw.Output, "null")
		rw.OutputID = strPtr(r.OutputID)
		rw.ReplayedFrom = strPtr(r.ReplayedFrom)
		out.Results = append(out.Results, rw)
	}
	return out
}

type lineWire struct {
	Seq    int64           `json:"seq"`
	TurnID string          `json:"turn_id"`
	CallID *string         `json:"call_id"`
	Kind   string          `json:"kind"`
	At     time.Time       `json:"at"`
	Data   json.RawMessage `json:"data"`
}

func toLineWire(l turn.Line) lineWire {
	out := lineWire{Seq: l.Seq, TurnID: l.TurnID, Kind: string(l.Kind), At: l.At.UTC(), Data: l.Data}
	out.CallID = strPtr(l.CallID)
	out.Data = rawOr(out.Data, "{}")
	return out
}

type toolWire struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Effect      string          `json:"effect"`
	Idempotent  bool            `json:"idempotent"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Resources are the tool's resource templates; the caps its
	// max_concurrency keys (absent when unset).
	Resources                []string `json:"resources,omitempty"`
	MaxConcurrency           int      `json:"max_concurrency,omitempty"`
	MaxConcurrencyPerSession int      `json:"max_concurrency_per_session,omitempty"`
	// Approval is the tool's approval policy (absent: never).
	Approval *tool.Approval `json:"approval,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// decodeJSON reads one JSON value into v. Unknown fields are ignored (a
// client may send more than this version knows); trailing data is an error,
// and so is a body that is not UTF-8 (RFC 8259), which no store can keep.
func decodeJSON(r *http.Request, v any) error {
	return decodeJSONFrom(r.Body, v)
}

// decodeJSONFrom is decodeJSON of a body. The body is read whole first: an
// error reading it is reported as where the decoder would have met it, and
// only a body read to its end is checked for UTF-8.
func decodeJSONFrom(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return decodeStream(io.MultiReader(bytes.NewReader(data), errorReader{err}), v)
	}
	if err := checkUTF8(data); err != nil {
		return err
	}
	return decodeStream(bytes.NewReader(data), v)
}

// decodeStrict is decodeJSONFrom of a body already read, refusing fields v
// does not have (400 invalid_request, as are values of the wrong type):
// for bodies where a misspelt field must not pass silently.
func decodeStrict(body []byte, v any) error {
	if err := checkUTF8(body); err != nil {
		return err
	}
	return decodeJSONValue(bytes.NewReader(body), v, true)
}

// decodeStream decodes one JSON value and checks that nothing follows it.
func decodeStream(body io.Reader, v any) error { return decodeJSONValue(body, v, false) }

// decodeJSONValue is decodeStream, refusing unknown fields when strict.
func decodeJSONValue(body io.Reader, v any, strict bool) error {
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if e := bodyReadLimit(err); e != nil {
			return e
		}
		if errors.Is(err, io.EOF) {
			return errHTTP(http.StatusBadRequest, "malformed_json", "the request body is empty; a JSON object is expected")
		}
		var typeErr *json.UnmarshalTypeError
		if strict && errors.As(err, &typeErr) {
			return errHTTP(http.StatusBadRequest, "invalid_request", "the field "+typeErr.Field+" has the wrong type")
		}
		if strict && strings.HasPrefix(err.Error(), "json: unknown field ") {
			return errHTTP(http.StatusBadRequest, "invalid_request", "the body is not valid: "+err.Error())
		}
		if errors.As(err, &typeErr) {
			return errHTTP(http.StatusBadRequest, "malformed_json", fmt.Sprintf("field %q: expected %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value))
		}
		return errHTTP(http.StatusBadRequest, "malformed_json", "the request body is not valid JSON: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if e := bodyReadLimit(err); e != nil {
			return e
		}
		return errHTTP(http.StatusBadRequest, "malformed_json", "unexpected data after the JSON value")
	}
	return nil
}

// readBodyError maps an error reading a request body to its answer: 413
// past the limit, 408 when the body came too slowly, else 400.
func readBodyError(err error) error {
	if e := bodyReadLimit(err); e != nil {
		return e
	}
	return errHTTP(http.StatusBadRequest, "unreadable_body", "the request body could not be read")
}

// bodyReadLimit is the answer to an error reading a request body that hit
// a limit — 413 past the size limit, 408 when the body came too slowly —
// and nil for any other error.
func bodyReadLimit(err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return errBodyTooLarge(tooLarge.Limit)
	case isTimeout(err):
		return errReadTimeout()
	}
	return nil
}

// isTimeout reports whether err is a read deadline passing (the server's
// ReadTimeout while the body is still arriving).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func errReadTimeout() error {
	return errHTTP(http.StatusRequestTimeout, "request_timeout", "the request body did not arrive in time")
}

// checkUTF8 refuses a body that is not UTF-8, naming the first bad byte.
func checkUTF8(b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	at := 0
	for at < len(b) {
		r, size := utf8.DecodeRune(b[at:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		at += size
	}
	return errHTTP(http.StatusBadRequest, "malformed_json", fmt.Sprintf("the request body is not valid UTF-8 (byte %d); JSON text is UTF-8", at))
}

func errBodyTooLarge(limit int64) error {
	return errHTTP(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body exceeds %d bytes", limit))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// preferences parses RFC 7240 Prefer headers into name → value (nil when
// there are none).
func preferences(r *http.Request) map[string]string {
	var out map[string]string
	for _, h := range r.Header.Values("Prefer") {
		for _, part := range strings.Split(h, ",") {
			pref, _, _ := strings.Cut(part, ";")
			name, value, _ := strings.Cut(strings.TrimSpace(pref), "=")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "" {
				if out == nil {
					out = map[string]string{}
				}
				out[name] = strings.Trim(strings.TrimSpace(value), `"`)
			}
		}
	}
	return out
}

// strPtr is s for an optional wire field: nil (JSON null) when s is empty.
func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// rawOr is r, or def when r is empty: the JSON a wire field holds for a
// value the store kept none of.
func rawOr(r json.RawMessage, def string) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage(def)
	}
	return r
}
