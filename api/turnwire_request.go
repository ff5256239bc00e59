package api

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/turnd/turnd/internal/rawjson"
)

// bufferedBodyMax bounds the bodies decodeTurnRequest reads into a pooled
// buffer and may scan by hand: 256 KiB, net/http's bound on the request body
// an HTTP/1 server reads and discards after the handler
// (maxPostHandlerReadBytes). Other bodies (larger ones, chunked ones, those
// of HTTP/2) go to decodeJSON, which reads them whole too, since only a
// body read to its end can be checked for UTF-8, but into a buffer of their
// own.
const bufferedBodyMax = 256 << 10

// decodeTurnRequest decodes the body of a native POST of a turn into req
// with the same outcome, value and error alike, as decodeJSON(r, req).
func decodeTurnRequest(r *http.Request, req *turnRequest) error {
	if r.ProtoMajor != 1 || r.ContentLength < 0 || r.ContentLength > bufferedBodyMax {
		return decodeJSON(r, req)
	}
	p := wireBuffers.Get().(*[]byte)
	b := *p
	if need := int(r.ContentLength) + 1; cap(b) < need {
		b = make([]byte, 0, need)
	}
	b, err := readBody(b[:0], r.Body)
	switch {
	case err != nil:
		// Let the decoder meet the error where it would have.
		err = decodeStream(io.MultiReader(bytes.NewReader(b), errorReader{err}), req)
	case !scanTurnRequest(b, req):
		err = decodeJSONFrom(bytes.NewReader(b), req)
	}
	putWireBuffer(p, b)
	return err
}

// readBody appends all of body to b; its error is nil at EOF.
func readBody(b []byte, body io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) { return 0, r.err }

// span is a range of the body: [start, end).
type span struct{ start, end int }

func (s span) len() int { return s.end - s.start }

// callSpans is where a call's fields are in the body; a string field left
// at the zero span was absent or null (both leave "").
type callSpans struct {
	id, name, arguments span
	hasArguments        bool
}

// scanTurnRequest sets *req to what encoding/json decodes from body, and
// reports true, where it is sure to: body is one JSON object whose keys
// are plain ASCII, each of turnRequest's and callWire's keys at most once
// and spelled as their tags are, its string fields strings without escapes
// (or null), calls an array (or null) of objects (or nulls), all of it
// UTF-8. Anything else, errors included, is left to encoding/json: it
// reports false and leaves req alone.
func scanTurnRequest(body []byte, req *turnRequest) bool {
	if !utf8.Valid(body) {
		return false
	}
	var inline [8]callSpans
	t, ok := scanTurnObject(body, inline[:0])
	if !ok {
		return false
	}
	t.copyInto(body, req)
	return true
}

// turnSpans is where a turn request's fields are in the body; calls is
// nil where the body's calls were absent or null.
type turnSpans struct {
	id, mode, policy span
	calls            []callSpans
}

// The bits of the turn request's keys scanTurnObject has met.
const (
	seenID = 1 << iota
	seenCalls
	seenMode
	seenPolicy
)

// scanTurnObject finds the fields of the turn request that is all of body,
// its calls appended to inline, and reports whether scanTurnRequest may
// decode it by hand.
func scanTurnObject(body []byte, inline []callSpans) (turnSpans, bool) {
	s := rawjson.Scanner{B: body}
	var (
		t    turnSpans
		seen uint8
	)
	i := s.Space(0)
	if i >= len(body) || body[i] != '{' {
		return t, false
	}
	if i = s.Space(i + 1); i < len(body) && body[i] == '}' {
		return t, s.Space(i+1) == len(body)
	}
	for {
		key, j, ok := plainKey(&s, i)
		if !ok {
			return t, false
		}
		var bit uint8
		switch string(key) {
		case "id":
			bit = seenID
			j, t.id, ok = stringField(&s, j)
		case "mode":
			bit = seenMode
			j, t.mode, ok = stringField(&s, j)
		case "failure_policy":
			bit = seenPolicy
			j, t.policy, ok = stringField(&s, j)
		case "calls":
			bit = seenCalls
			if end := rawjson.LiteralEnd(body, j, "null"); end > 0 {
				j = end // calls stays nil, as null decodes
				break
			}
			j, t.calls, ok = callsField(&s, j, inline)
		default:
			if foldsToAny(key, "id", "mode", "failure_policy", "calls") {
				return t, false
			}
			j = s.Value(j, 2)
			ok = j >= 0
		}
		if !ok || seen&bit != 0 {
			return t, false
		}
		seen |= bit
		more := false
		if i, more, ok = s.Sep(j, '}'); !ok {
			return t, false
		} else if !more {
			return t, s.Space(i) == len(body)
		}
	}
}

// copyInto sets *req to the fields t found in body, copied out of the
// pooled body: one string holds every string field, one array every
// call's arguments.
func (t *turnSpans) copyInto(body []byte, req *turnRequest) {
	size, nargs := t.id.len()+t.mode.len()+t.policy.len(), 0
	for _, c := range t.calls {
		size += c.id.len() + c.name.len()
		nargs += c.arguments.len()
	}
	var texts strings.Builder
	texts.Grow(size)
	for _, sp := range [3]span{t.id, t.mode, t.policy} {
		texts.Write(body[sp.start:sp.end])
	}
	for _, c := range t.calls {
		texts.Write(body[c.id.start:c.id.end])
		texts.Write(body[c.name.start:c.name.end])
	}
	all := texts.String()
	cut := func(sp span) string {
		s := all[:sp.len()]
		all = all[len(s):]
		return s
	}
	*req = turnRequest{ID: cut(t.id), Mode: cut(t.mode), FailurePolicy: cut(t.policy)}
	if t.calls == nil {
		return
	}
	req.Calls = make([]callWire, len(t.calls))
	args := make([]byte, 0, nargs)
	for k, c := range t.calls {
		cw := &req.Calls[k]
		cw.ID, cw.Name = cut(c.id), cut(c.name)
		if c.hasArguments {
			n := len(args)
			args = append(args, body[c.arguments.start:c.arguments.end]...)
			cw.Arguments = args[n:len(args):len(args)]
		}
	}
}

// callsField scans the array of calls at body[i] into calls.
func callsField(s *rawjson.Scanner, i int, calls []callSpans) (int, []callSpans, bool) {
	b := s.B
	if i >= len(b) || b[i] != '[' {
		return i, calls, false
	}
	if i = s.Space(i + 1); i < len(b) && b[i] == ']' {
		return i + 1, calls, true
	}
	for {
		var c callSpans
		var ok bool
		if i, c, ok = callObject(s, i); !ok {
			return i, calls, false
		}
		calls = append(calls, c)
		more := false
		if i, more, ok = s.Sep(i, ']'); !ok || !more {
			return i, calls, ok
		}
	}
}

// callObject scans one call (an object, or null for a zero call) at b[i].
func callObject(s *rawjson.Scanner, i int) (int, callSpans, bool) {
	var c callSpans
	b := s.B
	if rawjson.LiteralEnd(b, i, "null") > 0 {
		return i + len("null"), c, true
	}
	if i >= len(b) || b[i] != '{' {
		return i, c, false
	}
	if i = s.Space(i + 1); i < len(b) && b[i] == '}' {
		return i + 1, c, true
	}
	var seen uint8
	for {
		key, j, ok := plainKey(s, i)
		if !ok {
			return i, c, false
		}
		var bit uint8
		switch string(key) {
		case "id":
			bit = 1
			j, c.id, ok = stringField(s, j)
		case "name":
			bit = 2
			j, c.name, ok = stringField(s, j)
		case "arguments":
			bit = 4
			end := s.Value(j, 3)
			c.arguments, c.hasArguments = span{j, end}, true
			j, ok = end, end >= 0
		default:
			if foldsToAny(key, "id", "name", "arguments") {
				return i, c, false
			}
			j = s.Value(j, 3)
			ok = j >= 0
		}
		if !ok || seen&bit != 0 {
			return i, c, false
		}
		seen |= bit
		more := false
		if i, more, ok = s.Sep(j, '}'); !ok || !more {
			return i, c, ok
		}
	}
}

// plainKey scans an object key at b[i] and the colon after it, returning
// the key and the index of its value. Only keys of printable ASCII without
// escapes are plain: others may name a field by escapes or Unicode case
// folding, which is encoding/json's to judge.
func plainKey(s *rawjson.Scanner, i int) ([]byte, int, bool) {
	b := s.B
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	start := i + 1
	for i = start; i < len(b) && b[i] != '"'; i++ {
		if c := b[i]; c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return nil, i, false
		}
	}
	if i >= len(b) {
		return nil, i, false
	}
	key := b[start:i]
	if i = s.Space(i + 1); i >= len(b) || b[i] != ':' {
		return nil, i, false
	}
	return key, s.Space(i + 1), true
}

// foldsToAny reports whether the ASCII key matches one of names ignoring
// case: encoding/json would decode it into that field.
func foldsToAny(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}

// stringField scans a string field's value at b[i]: null (the zero span,
// which leaves the field "") or a string without escapes or control
// characters whose bytes are valid UTF-8, which encoding/json keeps as it
// is. Any other value is for encoding/json to decode or refuse.
func stringField(s *rawjson.Scanner, i int) (int, span, bool) {
	b := s.B
	if end := rawjson.LiteralEnd(b, i, "null"); end > 0 {
		return end, span{}, true
	}
	if i >= len(b) || b[i] != '"' {
		return i, span{}, false
	}
	start, ascii := i+1, true
	for i = start; i < len(b) && b[i] != '"'; i++ {
		switch c := b[i]; {
		case c < 0x20 || c == '\\':
			return i, span{}, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if i >= len(b) || !ascii && !utf8.Valid(b[start:i]) {
		return i, span{}, false
	}
	return i + 1, span{start, i}, true
}
