package api

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/turn"
)

// The native turn's wire, by hand. POST /v1/sessions/{sid}/turns is the
// hottest route, and encoding/json's reflection and allocations for its
// request and response were some 8% of the server's CPU under load, and
// much of its garbage. The two functions here stand in for the
// encoding/json paths in wire.go without changing a byte:
//
//   - writeTurnJSON answers what writeJSON(w, status, toTurnWire(t)) would;
//   - decodeTurnRequest decodes what decodeJSON(r, &turnRequest{}) would,
//     with the same errors.
//
// Each takes a fast path only where it is sure of giving the same bytes or
// values, and otherwise declines to the encoding/json path, which stays
// the reference: turnwire_test.go compares the two on tables and fuzzed
// inputs.

// maxPooledBuffer bounds the buffers kept for reuse, so that one large
// turn does not pin its buffer for the rest of the process.
const maxPooledBuffer = 64 << 10

var wireBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func putWireBuffer(p *[]byte, b []byte) {
	if cap(b) > maxPooledBuffer {
		return
	}
	*p = b[:0]
	wireBuffers.Put(p)
}

// writeTurnJSON answers t as its native turn wire with status.
func writeTurnJSON(w http.ResponseWriter, status int, t turn.Turn) {
	p := wireBuffers.Get().(*[]byte)
	b, ok := appendTurnJSON((*p)[:0], t)
	if !ok {
		putWireBuffer(p, b)
		writeJSON(w, status, toTurnWire(t))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	putWireBuffer(p, b)
}

// appendTurnJSON appends the bytes json.Encoder (HTML escaping off) writes
// for toTurnWire(t), trailing newline included. It reports false, with no
// promise about dst, where the encoder would fail (a time outside what RFC
// 3339 can say, an output that is not JSON) or where it is not sure to
// match (an output nested deeper than it scans); the caller then encodes
// with encoding/json.
func appendTurnJSON(dst []byte, t turn.Turn) ([]byte, bool) {
	var ok bool
	b := append(dst, `{"id":`...)
	b = appendJSONString(b, t.ID)
	b = append(b, `,"session_id":`...)
	b = appendJSONString(b, t.SessionID)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(t.Status))
	b = append(b, `,"mode":`...)
	b = appendJSONString(b, string(t.Mode))
	b = append(b, `,"failure_policy":`...)
	b = appendJSONString(b, string(t.FailurePolicy))
	b = append(b, `,"created_at":`...)
	if b, ok = appendJSONTime(b, t.CreatedAt); !ok {
		return b, false
	}
	b = append(b, `,"settled_at":`...)
	if b, ok = appendJSONTimeOrNull(b, t.SettledAt); !ok {
		return b, false
	}
	b = append(b, `,"results":[`...)
	for i := range t.Results {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendResultJSON(b, &t.Results[i]); !ok {
			return b, false
		}
	}
	b = append(b, "]}\n"...)
	return b, true
}

// appendResultJSON appends r as resultWire encodes: error, output_id and
// replayed_from are omitted when empty, the times are null when zero.
func appendResultJSON(b []byte, r *turn.Result) ([]byte, bool) {
	var ok bool
	b = append(b, `{"call_id":`...)
	b = appendJSONString(b, r.CallID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, r.Name)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(r.Status))
	b = append(b, `,"output":`...)
	if len(r.Output) == 0 {
		b = append(b, "null"...)
	} else if b, ok = appendCompactJSON(b, r.Output); !ok {
		return b, false
	}
	if r.Error != nil {
		b = append(b, `,"error":{"code":`...)
		b = appendJSONString(b, r.Error.Code)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, r.Error.Message)
		b = append(b, '}')
	}
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, r.Truncated)
	b = append(b, `,"original_bytes":`...)
	b = strconv.AppendInt(b, r.OriginalBytes, 10)
	b = append(b, `,"original_lines":`...)
	b = strconv.AppendInt(b, r.OriginalLines, 10)
	if r.OutputID != "" {
		b = append(b, `,"output_id":`...)
		b = appendJSONString(b, r.OutputID)
	}
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = append(b, `,"started_at":`...)
	if b, ok = appendJSONTimeOrNull(b, r.StartedAt); !ok {
		return b, false
	}
	b = append(b, `,"finished_at":`...)
	if b, ok = appendJSONTimeOrNull(b, r.FinishedAt); !ok {
		return b, false
	}
	if r.ReplayedFrom != "" {
		b = append(b, `,"replayed_from":`...)
		b = appendJSONString(b, r.ReplayedFrom)
	}
	return append(b, '}'), true
}

// appendJSONTime appends t in UTC as time.Time.MarshalJSON does (RFC 3339
// with nanoseconds, quoted), or reports false where MarshalJSON fails: a
// year that is not four digits wide.
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	b = append(b, '"')
	n0 := len(b)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	if len(b) < n0+5 || b[n0+4] != '-' {
		return b, false
	}
	return append(b, '"'), true
}

// appendJSONTimeOrNull is appendJSONTime for timePtr(t): null when zero.
func appendJSONTimeOrNull(b []byte, t time.Time) ([]byte, bool) {
	if t.IsZero() {
		return append(b, "null"...), true
	}
	return appendJSONTime(b, t)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes strings with
// HTML escaping off: ", \ and control characters escaped (\b \f \n \r \t
// short, the others \u00XX), each byte of invalid UTF-8 as \ufffd, U+2028
// and U+2029 escaped, everything else as it is.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendCompactJSON appends src as json.Compact writes it (and as the
// encoder writes a json.RawMessage with HTML escaping off): the value with
// every space, tab and line break outside its strings removed, strings
// byte for byte. It reports false where src is not one JSON value, or is
// nested deeper than jsonScanner scans.
func appendCompactJSON(b, src []byte) ([]byte, bool) {
	s := jsonScanner{b: src}
	i := s.space(0)
	if i = s.value(i, 0); i < 0 {
		return b, false
	}
	if s.space(i) != len(src) {
		return b, false
	}
	if !s.sawSpace {
		return append(b, src...), true
	}
	// Valid JSON: only strings need following to drop the rest's spaces.
	start := 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case ' ', '\t', '\n', '\r':
			b = append(b, src[start:i]...)
			start = i + 1
		case '"':
			for i++; src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		}
	}
	return append(b, src[start:]...), true
}

// maxScanDepth is how deeply nested a value jsonScanner follows before it
// declines (encoding/json allows 10000; deeper values take its path).
const maxScanDepth = 512

// jsonScanner checks JSON text against the grammar encoding/json's scanner
// accepts: RFC 8259 values, strings of any bytes but control characters
// (their UTF-8 is not checked), the escapes \" \\ \/ \b \f \n \r \t \uXXXX.
type jsonScanner struct {
	b        []byte
	sawSpace bool // whitespace was skipped somewhere
}

// space returns the index of the first byte at or after i that is not JSON
// whitespace.
func (s *jsonScanner) space(i int) int {
	for ; i < len(s.b); i++ {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			s.sawSpace = true
		default:
			return i
		}
	}
	return i
}

// sep reads what follows a member or an item ending before i: a comma
// (more, next is where the next one starts) or the container's closing
// byte end (not more, next is just past it). ok is false for anything else.
func (s *jsonScanner) sep(i int, end byte) (next int, more, ok bool) {
	if i = s.space(i); i < len(s.b) {
		switch s.b[i] {
		case ',':
			return s.space(i + 1), true, true
		case end:
			return i + 1, false, true
		}
	}
	return i, false, false
}

// value returns the index just past the JSON value that starts at b[i], or
// -1 if none does (or it is nested deeper than maxScanDepth).
func (s *jsonScanner) value(i, depth int) int {
	b := s.b
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '{', '[':
		if depth >= maxScanDepth {
			return -1
		}
		end := byte(']')
		if c == '{' {
			end = '}'
		}
		if i = s.space(i + 1); i < len(b) && b[i] == end {
			return i + 1
		}
		for {
			if c == '{' { // a member's key and colon
				if i >= len(b) || b[i] != '"' {
					return -1
				}
				if i = s.str(i); i < 0 {
					return -1
				}
				if i = s.space(i); i >= len(b) || b[i] != ':' {
					return -1
				}
				i = s.space(i + 1)
			}
			if i = s.value(i, depth+1); i < 0 {
				return -1
			}
			more, ok := false, false
			if i, more, ok = s.sep(i, end); !ok {
				return -1
			} else if !more {
				return i
			}
		}
	case '"':
		return s.str(i)
	case 't':
		return literalEnd(b, i, "true")
	case 'f':
		return literalEnd(b, i, "false")
	case 'n':
		return literalEnd(b, i, "null")
	default:
		return numberEnd(b, i)
	}
}

// str returns the index just past the string that starts at b[i] (a
// quote), or -1.
func (s *jsonScanner) str(i int) int {
	b := s.b
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i++; i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func literalEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd returns the index just past the number that starts at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, or -1.
func numberEnd(b []byte, i int) int {
	digits := func(i int) int {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(i + 1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

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
	s := jsonScanner{b: body}
	var (
		id, mode, policy span
		calls            []callSpans
		seen             uint8
		inline           [8]callSpans
	)
	const (
		seenID = 1 << iota
		seenCalls
		seenMode
		seenPolicy
	)
	i := s.space(0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = s.space(i + 1)
	if i < len(body) && body[i] == '}' {
		i++
	} else {
		for {
			key, j, ok := plainKey(&s, i)
			if !ok {
				return false
			}
			var bit uint8
			switch string(key) {
			case "id":
				bit = seenID
				j, id, ok = stringField(&s, j)
			case "mode":
				bit = seenMode
				j, mode, ok = stringField(&s, j)
			case "failure_policy":
				bit = seenPolicy
				j, policy, ok = stringField(&s, j)
			case "calls":
				bit = seenCalls
				if end := literalEnd(body, j, "null"); end > 0 {
					j = end // calls stays nil, as null decodes
					break
				}
				calls = inline[:0]
				j, calls, ok = callsField(&s, j, calls)
			default:
				if foldsToAny(key, "id", "mode", "failure_policy", "calls") {
					return false
				}
				j = s.value(j, 2)
				ok = j >= 0
			}
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
			more := false
			if i, more, ok = s.sep(j, '}'); !ok {
				return false
			} else if !more {
				break
			}
		}
	}
	if s.space(i) != len(body) {
		return false
	}

	// The values, copied out of the pooled body: one string holds every
	// string field, one array every call's arguments.
	size, nargs := id.len()+mode.len()+policy.len(), 0
	for _, c := range calls {
		size += c.id.len() + c.name.len()
		nargs += c.arguments.len()
	}
	var texts strings.Builder
	texts.Grow(size)
	for _, sp := range [3]span{id, mode, policy} {
		texts.Write(body[sp.start:sp.end])
	}
	for _, c := range calls {
		texts.Write(body[c.id.start:c.id.end])
		texts.Write(body[c.name.start:c.name.end])
	}
	all := texts.String()
	cut := func(sp span) string {
		s := all[:sp.len()]
		all = all[len(s):]
		return s
	}
	*req = turnRequest{ID: cut(id), Mode: cut(mode), FailurePolicy: cut(policy)}
	if calls == nil {
		return true
	}
	req.Calls = make([]callWire, len(calls))
	args := make([]byte, 0, nargs)
	for k, c := range calls {
		cw := &req.Calls[k]
		cw.ID, cw.Name = cut(c.id), cut(c.name)
		if c.hasArguments {
			n := len(args)
			args = append(args, body[c.arguments.start:c.arguments.end]...)
			cw.Arguments = args[n:len(args):len(args)]
		}
	}
	return true
}

// callsField scans the array of calls at body[i] into calls.
func callsField(s *jsonScanner, i int, calls []callSpans) (int, []callSpans, bool) {
	b := s.b
	if i >= len(b) || b[i] != '[' {
		return i, calls, false
	}
	if i = s.space(i + 1); i < len(b) && b[i] == ']' {
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
		if i, more, ok = s.sep(i, ']'); !ok || !more {
			return i, calls, ok
		}
	}
}

// callObject scans one call (an object, or null for a zero call) at b[i].
func callObject(s *jsonScanner, i int) (int, callSpans, bool) {
	var c callSpans
	b := s.b
	if literalEnd(b, i, "null") > 0 {
		return i + len("null"), c, true
	}
	if i >= len(b) || b[i] != '{' {
		return i, c, false
	}
	if i = s.space(i + 1); i < len(b) && b[i] == '}' {
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
			end := s.value(j, 3)
			c.arguments, c.hasArguments = span{j, end}, true
			j, ok = end, end >= 0
		default:
			if foldsToAny(key, "id", "name", "arguments") {
				return i, c, false
			}
			j = s.value(j, 3)
			ok = j >= 0
		}
		if !ok || seen&bit != 0 {
			return i, c, false
		}
		seen |= bit
		more := false
		if i, more, ok = s.sep(j, '}'); !ok || !more {
			return i, c, ok
		}
	}
}

// plainKey scans an object key at b[i] and the colon after it, returning
// the key and the index of its value. Only keys of printable ASCII without
// escapes are plain: others may name a field by escapes or Unicode case
// folding, which is encoding/json's to judge.
func plainKey(s *jsonScanner, i int) ([]byte, int, bool) {
	b := s.b
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
	if i = s.space(i + 1); i >= len(b) || b[i] != ':' {
		return nil, i, false
	}
	return key, s.space(i + 1), true
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
func stringField(s *jsonScanner, i int) (int, span, bool) {
	b := s.b
	if end := literalEnd(b, i, "null"); end > 0 {
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
