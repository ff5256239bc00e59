package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/turnd/turnd/internal/rawjson"
	"github.com/turnd/turnd/turn"
)

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
	} else if b, ok = rawjson.AppendCompact(b, r.Output); !ok {
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

// appendJSONString appends s as json.Encoder with HTML escaping off writes
// it.
func appendJSONString(b []byte, s string) []byte {
	return rawjson.AppendString(b, s, rawjson.EscapeNoHTML)
}
