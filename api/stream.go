package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/turnd/turnd/api/provider"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/rawjson"
	"github.com/turnd/turnd/turn"
)

// Streamed turns: POST /v1/sessions/{sid}/turns with a body the client
// writes as the model generates (text/event-stream in a provider format,
// or application/x-ndjson natively). The body is parsed as it arrives;
// each call whose arguments are complete goes to a turn.Stream, which
// starts the reads it may start early; a clean end submits the turn as a
// whole post of the same calls would be, and a broken stream records
// nothing (422 stream_incomplete where the client still listens).

const (
	mediaEventStream = "text/event-stream"
	mediaNDJSON      = "application/x-ndjson"
	formatNDJSON     = "ndjson" // the metrics label of native streams
)

// streamedType reports whether the request's body is one of the streamed
// media types, and which.
func streamedType(r *http.Request) (string, bool) {
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, mediaEventStream) && !strings.HasPrefix(ct, mediaNDJSON) {
		return "", false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != mediaEventStream && mt != mediaNDJSON) {
		return "", false
	}
	return mt, true
}

func (s *server) postStreamTurn(w http.ResponseWriter, r *http.Request, mt string) {
	sessionID := chi.URLParam(r, "session_id")
	q := r.URL.Query()
	var (
		rq     renderQuery
		format = formatNDJSON
		err    error
	)
	if mt == mediaEventStream {
		if !q.Has("format") {
			s.writeError(w, r, errHTTP(http.StatusBadRequest, "invalid_query", "a text/event-stream body is a provider's stream: add format (openai.chat, openai.responses or anthropic.messages); a native streamed turn is application/x-ndjson"))
			return
		}
		if rq, err = providerQuery(r, false); err != nil {
			s.writeError(w, r, err)
			return
		}
		format = string(rq.format)
	} else if wantsProvider(r) {
		s.writeError(w, r, errHTTP(http.StatusBadRequest, "invalid_query", "an application/x-ndjson body is a native streamed turn: format, pending and since apply to text/event-stream bodies only"))
		return
	}
	h := &streamTurn{svc: s.svc, sessionID: sessionID, turnID: q.Get("turn_id"), format: format}
	body := s.streamBody(w, r)
	if mt == mediaNDJSON {
		err = readNDJSON(body, h)
	} else {
		h.mode = dispatch.Mode(q.Get("mode"))
		h.policy = dispatch.FailurePolicy(q.Get("failure_policy"))
		err = rq.format.ReadStream(body, h)
	}
	if err == nil && h.stream == nil {
		err = provider.ErrNoToolCalls
	}
	if err != nil {
		if h.stream != nil {
			h.stream.Abort()
		} else {
			s.svc.StreamBroken(format)
		}
		s.writeError(w, r, body.explain(err))
		return
	}
	// The answer may wait for the turn as long as a whole post's may,
	// however long the stream took.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.MaxWait + time.Minute))
	prefs := preferences(r)
	_, async := prefs["respond-async"]
	tr := turn.TurnRequest{ID: h.stream.TurnID(), Calls: h.stream.Calls(), Mode: h.mode, FailurePolicy: h.policy, Async: async}
	sub, err := h.stream.Submit(r.Context(), tr)
	write := s.writeTurn
	if mt == mediaEventStream {
		write = func(w http.ResponseWriter, r *http.Request, t turn.Turn) { s.writeRendered(w, r, rq, t) }
	}
	s.answerSubmitted(w, r, sessionID, prefs, sub, err, write)
}

// streamTurn feeds a parsed stream to a turn.Stream, opened when the
// stream names its id (or at its first call).
type streamTurn struct {
	svc       *turn.Service
	sessionID string
	turnID    string // ?turn_id, which takes precedence over the stream's id
	format    string
	mode      dispatch.Mode
	policy    dispatch.FailurePolicy
	stream    *turn.Stream
}

// Begin implements provider.StreamHandler.
func (h *streamTurn) Begin(id string) error {
	if h.stream != nil {
		return nil
	}
	if h.turnID != "" {
		id = h.turnID
	}
	h.stream = h.svc.OpenStream(h.sessionID, id, h.format)
	return nil
}

// Call implements provider.StreamHandler.
func (h *streamTurn) Call(c turn.Call) error {
	if h.stream == nil {
		_ = h.Begin("")
	}
	return h.stream.Add(c)
}

// readNDJSON reads a native streamed turn: a header line {"id", "mode"?,
// "failure_policy"?}, then one call {"id", "name", "arguments"} per line;
// the end of the body ends the turn. Blank lines are skipped.
func readNDJSON(r io.Reader, h *streamTurn) error {
	body := &provider.FailedReader{R: r}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4<<10), 16<<20)
	n := 0
	header := false
	for sc.Scan() {
		if body.Failed() {
			break // the line is what arrived before the body broke
		}
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !utf8.Valid(line) {
			return &provider.IncompleteError{Missing: fmt.Sprintf("line %d is not valid UTF-8", n)}
		}
		var err error
		if header {
			err = h.callLine(n, line)
		} else {
			header = true
			err = h.headerLine(n, line)
		}
		if err != nil {
			return err
		}
	}
	return h.endNDJSON(sc, body, header)
}

// ndjsonLine is either kind of line of a native streamed turn, as
// encoding/json decodes it: a header must carry no call's fields (a call
// line first is no header). A call's other keys, a header's among them,
// are ignored, as scanCallLine and a whole post's calls ignore them.
type ndjsonLine struct {
	ID            string          `json:"id"`
	Mode          string          `json:"mode"`
	FailurePolicy string          `json:"failure_policy"`
	Name          *string         `json:"name"`
	Arguments     json.RawMessage `json:"arguments"`
}

// headerLine takes line n, the stream's first, as its turn header.
func (h *streamTurn) headerLine(n int, line []byte) error {
	var l ndjsonLine
	err := json.Unmarshal(line, &l)
	if err != nil || line[0] != '{' || l.Name != nil || l.Arguments != nil {
		return &provider.IncompleteError{Missing: fmt.Sprintf(`line %d is not the turn header {"id", "mode"?, "failure_policy"?}%s`, n, errSuffix(err))}
	}
	h.mode, h.policy = dispatch.Mode(l.Mode), dispatch.FailurePolicy(l.FailurePolicy)
	return h.Begin(l.ID)
}

// callLine adds the call on line n, after the header, to the turn.
func (h *streamTurn) callLine(n int, line []byte) error {
	// Most call lines take turnwire.go's scanner, as whole posts' calls
	// do; the others encoding/json, below.
	if c, ok := scanCallLine(line); ok {
		return h.Call(c)
	}
	var l ndjsonLine
	err := json.Unmarshal(line, &l)
	if err != nil || line[0] != '{' {
		return &provider.IncompleteError{Missing: fmt.Sprintf(`line %d is not a call {"id", "name", "arguments"}%s`, n, errSuffix(err))}
	}
	name := ""
	if l.Name != nil {
		name = *l.Name
	}
	return h.Call(turn.Call{ID: l.ID, Name: name, Arguments: l.Arguments})
}

// endNDJSON judges how the stream sc read from body ended: by an error,
// before its header, without calls, or whole (nil).
func (h *streamTurn) endNDJSON(sc *bufio.Scanner, body *provider.FailedReader, header bool) error {
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &provider.IncompleteError{Missing: "a line longer than 16 MiB"}
		}
		return fmt.Errorf("reading the stream: %w", err)
	}
	if body.Failed() {
		return fmt.Errorf("reading the stream: %w", body.Err)
	}
	if !header {
		return &provider.IncompleteError{Missing: "the body ended before the turn header line"}
	}
	if len(h.stream.Calls()) == 0 {
		return &turn.InvalidError{Field: "calls", Reason: "the stream carried no call lines"}
	}
	return nil
}

// scanCallLine decodes a call line {"id","name","arguments"} as
// encoding/json would, where callObject is sure to (see scanTurnRequest),
// and reports false otherwise.
func scanCallLine(line []byte) (turn.Call, bool) {
	s := rawjson.Scanner{B: line}
	i := s.Space(0)
	if i >= len(line) || line[i] != '{' {
		return turn.Call{}, false
	}
	j, sp, ok := callObject(&s, i)
	if !ok || s.Space(j) != len(line) {
		return turn.Call{}, false
	}
	c := turn.Call{ID: string(line[sp.id.start:sp.id.end]), Name: string(line[sp.name.start:sp.name.end])}
	if sp.hasArguments {
		c.Arguments = bytes.Clone(line[sp.arguments.start:sp.arguments.end])
	}
	return c, true
}

func errSuffix(err error) string {
	if err != nil {
		return ": " + err.Error()
	}
	return ""
}

// streamBody is a streamed request body under the stream's deadlines: each
// read must bring bytes within the idle timeout, and the whole body must
// arrive within the stream's cap. They replace the server's ReadTimeout,
// which must not cut a long stream.
type streamBody struct {
	body     io.Reader
	rc       *http.ResponseController
	idle     time.Duration
	max      time.Duration
	until    time.Time
	deadline bool // the ResponseController takes deadlines
}

func (s *server) streamBody(w http.ResponseWriter, r *http.Request) *streamBody {
	b := &streamBody{
		body:  r.Body,
		rc:    http.NewResponseController(w),
		idle:  s.cfg.StreamIdleTimeout,
		max:   s.cfg.StreamMaxDuration,
		until: time.Now().Add(s.cfg.StreamMaxDuration),
	}
	b.deadline = b.rc.SetReadDeadline(b.next()) == nil
	return b
}

func (b *streamBody) next() time.Time {
	d := time.Now().Add(b.idle)
	if d.After(b.until) {
		d = b.until
	}
	return d
}

func (b *streamBody) Read(p []byte) (int, error) {
	if b.deadline {
		_ = b.rc.SetReadDeadline(b.next())
	}
	return b.body.Read(p)
}

// explain maps what ended a stream to the error answered.
func (b *streamBody) explain(err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return errBodyTooLarge(tooLarge.Limit)
	case isTimeout(err) && !time.Now().Before(b.until):
		return &provider.IncompleteError{Missing: fmt.Sprintf("the stream did not end within its cap of %s", b.max)}
	case isTimeout(err):
		return &provider.IncompleteError{Missing: fmt.Sprintf("nothing arrived for %s (the idle timeout)", b.idle)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &provider.IncompleteError{Missing: "the body broke off before its end"}
	}
	var ie *provider.IncompleteError
	var be *provider.BodyError
	var inv *turn.InvalidError
	var uc *provider.UnsupportedCallError
	if errors.As(err, &ie) || errors.As(err, &be) || errors.As(err, &inv) || errors.As(err, &uc) || errors.Is(err, provider.ErrNoToolCalls) {
		return err
	}
	return &provider.IncompleteError{Missing: "the body could not be read to its end"}
}
