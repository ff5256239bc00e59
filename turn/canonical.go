package turn

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/rawjson"
)

// canonicalJSON re-encodes a JSON value with sorted keys and no
// insignificant whitespace (rawjson's canonical form), so that formatting
// differences in a client's retry do not read as a conflict. Invalid JSON
// is returned as is; nothing becomes null.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	if isCanonical(raw) {
		return raw
	}
	w := getCanonWriter()
	defer putCanonWriter(w)
	if w.document(raw) {
		return bytes.Clone(w.out)
	}
	return reencodeJSON(raw)
}

// reencodeJSON is the canonical form by encoding/json, which defines it.
func reencodeJSON(raw []byte) []byte { return rawjson.Reencode(raw) }

// isCanonical reports whether raw is surely its own canonical form.
func isCanonical(raw []byte) bool { return rawjson.IsCanonical(raw) }

// maxCanonDepth is how deeply nested arguments the writer follows; deeper
// ones are left to reencodeJSON.
const maxCanonDepth = rawjson.MaxCanonicalDepth

// canonWriter writes the bytes requestHash hashes into out, reusing its
// buffers; it declines (returns false, out then meaningless) what only
// encoding/json can judge.
type canonWriter struct {
	out []byte
	c   rawjson.Canonicalizer
}

// maxPooledCanon keeps a writer that served a huge request out of the pool.
const maxPooledCanon = 64 << 10

var canonPool = sync.Pool{New: func() any { return new(canonWriter) }}

func getCanonWriter() *canonWriter {
	w := canonPool.Get().(*canonWriter)
	w.out = w.out[:0]
	return w
}

func putCanonWriter(w *canonWriter) {
	if cap(w.out) > maxPooledCanon {
		return
	}
	w.c.Reset()
	canonPool.Put(w)
}

// document appends the canonical form of raw to out.
func (w *canonWriter) document(raw []byte) bool {
	var ok bool
	w.out, ok = w.c.Append(w.out, raw)
	return ok
}

// request writes what json.Marshal writes for requestJSON's struct.
func (w *canonWriter) request(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) bool {
	w.out = append(w.out[:0], `{"calls":[`...)
	for i, c := range calls {
		if i > 0 {
			w.out = append(w.out, ',')
		}
		w.out = append(w.out, `{"id":`...)
		w.out = appendJSONString(w.out, c.ID)
		w.out = append(w.out, `,"name":`...)
		w.out = appendJSONString(w.out, c.Name)
		// canonicalJSON never returns nothing, so omitempty never omits.
		w.out = append(w.out, `,"arguments":`...)
		if len(c.Arguments) == 0 {
			w.out = append(w.out, "null"...)
		} else if !w.document(c.Arguments) {
			return false
		}
		w.out = append(w.out, '}')
	}
	w.out = append(w.out, `],"mode":`...)
	w.out = appendJSONString(w.out, string(mode))
	w.out = append(w.out, `,"policy":`...)
	w.out = appendJSONString(w.out, string(policy))
	w.out = append(w.out, '}')
	return true
}

// appendJSONString appends s as json.Marshal writes a Go string.
func appendJSONString(dst []byte, s string) []byte {
	return rawjson.AppendString(dst, s, rawjson.EscapeHTML)
}
