package sqlstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/internal/rawjson"
	"github.com/turnd/turnd/turn"
)

// Ledger batches. Both stores keep the lines that one write appends as ONE
// row (session, first and last seq, the lines as a JSON array) instead of
// a row per line: a turn's dozen lines cost one row and one index entry.
// The seqs stay per line: line i of a batch has seq first+i, and batches
// of a session never overlap, so the ledger reads as before, gap-free.
//
// A line is an object {"t": turn id, "c": call id, "k": kind, "a": unix
// microseconds, "d": data}, "d" absent when the line has no data. The data
// is kept as a JSON string holding its text, so it round-trips byte for
// byte (whitespace around the value included), as the per-line json column
// did.

// lineJSON is a stored line.
type lineJSON struct {
	T string  `json:"t"`
	C string  `json:"c"`
	K string  `json:"k"`
	A int64   `json:"a"`
	D *string `json:"d,omitempty"`
}

// LinesJSON encodes lines written under k as a batch's JSON array,
// rejecting data that is not valid JSON.
func LinesJSON(k turn.TurnKey, lines []turn.Line) ([]byte, error) {
	b := make([]byte, 0, 64*len(lines))
	b = append(b, '[')
	for i, l := range lines {
		if len(l.Data) > 0 && !json.Valid(l.Data) {
			return nil, fmt.Errorf("line %d data is not valid JSON", i)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"t":`...)
		b = appendString(b, LineTurn(l, k))
		b = append(b, `,"c":`...)
		b = appendString(b, l.CallID)
		b = append(b, `,"k":`...)
		b = appendString(b, string(l.Kind))
		b = append(b, `,"a":`...)
		b = strconv.AppendInt(b, l.At.UnixMicro(), 10)
		if len(l.Data) > 0 {
			b = append(b, `,"d":`...)
			b = appendString(b, []byte(l.Data))
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, the rest as is. A string that is not valid UTF-8 is
// written as json.Marshal writes it, the invalid bytes replaced.
func appendString[S string | []byte](b []byte, s S) []byte {
	if !validUTF8(s) {
		return rawjson.AppendString(b, s, rawjson.EscapeHTML)
	}
	return rawjson.AppendString(b, s, rawjson.EscapeMinimal)
}

func validUTF8[S string | []byte](s S) bool {
	switch s := any(s).(type) {
	case string:
		return utf8.ValidString(s)
	case []byte:
		return utf8.Valid(s)
	}
	panic("unreachable")
}

// Page collects a page of ledger lines from batches read in seq order:
// the lines with seq > After, at most Limit of them, and lines only while
// their turn.LineBytes sum to at most MaxBytes (the first line whatever
// its size, so that paging progresses).
type Page struct {
	After    int64
	Limit    int
	MaxBytes int
	// Lines is the page so far; NewPage makes it non-nil.
	Lines []turn.Line
	bytes int
	full  bool
}

// NewPage returns an empty page with those bounds.
func NewPage(after int64, limit, maxBytes int) *Page {
	return &Page{After: after, Limit: limit, MaxBytes: maxBytes, Lines: []turn.Line{}}
}

// Add appends the lines of a batch of sessionID whose first line has seq
// first (LinesJSON's encoding) within the page's bounds, and reports
// whether the page is full: no later line would be added.
func (p *Page) Add(sessionID string, first int64, b []byte) (full bool, err error) {
	if p.full {
		return true, nil
	}
	var stored []lineJSON
	if err := json.Unmarshal(b, &stored); err != nil {
		return false, fmt.Errorf("decoding ledger lines from seq %d: %w", first, err)
	}
	for i, l := range stored {
		seq := first + int64(i)
		if seq <= p.After {
			continue
		}
		if len(p.Lines) >= p.Limit {
			p.full = true
			break
		}
		line := turn.Line{Seq: seq, SessionID: sessionID, TurnID: l.T, CallID: l.C, Kind: turn.LineKind(l.K),
			At: time.UnixMicro(l.A).UTC()}
		if l.D != nil {
			line.Data = json.RawMessage(*l.D)
		}
		n := turn.LineBytes(line)
		if len(p.Lines) > 0 && n > p.MaxBytes-p.bytes {
			p.full = true
			break
		}
		p.bytes += n
		p.Lines = append(p.Lines, line)
	}
	if len(p.Lines) >= p.Limit {
		p.full = true
	}
	return p.full, nil
}
