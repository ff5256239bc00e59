package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
)

// LedgerPage reads one page of a session's ledger: lines with seq greater
// than after, at most limit of them (0: the server's default) and at most
// the server's byte bound. An empty page means the reader is up to date.
func (c *Client) LedgerPage(ctx context.Context, sessionID string, after int64, limit int) (*LedgerPage, error) {
	path := "/v1/sessions/" + esc(sessionID) + "/ledger?after=" + strconv.FormatInt(after, 10)
	if limit > 0 {
		path += "&limit=" + strconv.Itoa(limit)
	}
	return callJSON[LedgerPage](ctx, c, request{method: http.MethodGet, path: path})
}

// Ledger iterates over a session's ledger lines with seq greater than
// after, page by page, until a page is empty (the lines written so far).
// An error ends the iteration after being yielded; resume with the last
// seq seen as after.
func (c *Client) Ledger(ctx context.Context, sessionID string, after int64) iter.Seq2[LedgerLine, error] {
	return func(yield func(LedgerLine, error) bool) {
		for {
			p, err := c.LedgerPage(ctx, sessionID, after, 0)
			if err != nil {
				yield(LedgerLine{}, err)
				return
			}
			if len(p.Lines) == 0 {
				return
			}
			for _, l := range p.Lines {
				if !yield(l, nil) {
					return
				}
			}
			after = p.NextAfter
		}
	}
}

// Events iterates over a turn's ledger lines as the server streams them
// (Server-Sent Events), from the line after lastSeq (0: from the start)
// to the turn's turn_settled line. A dropped connection is resumed with
// Last-Event-ID, up to the client's retry policy; an error ends the
// iteration after being yielded. Kinds this client does not know are
// yielded as they are: skip what you do not need.
func (c *Client) Events(ctx context.Context, sessionID, turnID string, lastSeq int64) iter.Seq2[LedgerLine, error] {
	return func(yield func(LedgerLine, error) bool) {
		failures := 0
		for {
			h := http.Header{}
			h.Set("Accept", "text/event-stream")
			if lastSeq > 0 {
				h.Set("Last-Event-ID", strconv.FormatInt(lastSeq, 10))
			}
			resp, err := c.do(ctx, request{method: http.MethodGet, path: turnPath(sessionID, turnID) + "/events", header: h})
			if err != nil {
				yield(LedgerLine{}, err)
				return
			}
			settled, progressed, stop, err := readEvents(resp.Body, func(l LedgerLine) bool {
				lastSeq = l.Seq
				return yield(l, nil)
			})
			resp.Body.Close()
			switch {
			case stop || settled:
				return
			case ctx.Err() != nil:
				yield(LedgerLine{}, ctx.Err())
				return
			}
			if err == nil && !progressed {
				// The server closes the stream of a settled turn at once
				// when the client has seen its lines (lastSeq at or past
				// its turn_settled line).
				t, terr := c.Turn(ctx, sessionID, turnID)
				if terr == nil && t.Settled() {
					return
				}
			}
			if progressed {
				failures = 0
			}
			if failures++; failures >= c.retry.MaxAttempts {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				yield(LedgerLine{}, fmt.Errorf("client: the event stream of turn %s ended before turn_settled: %w", turnID, err))
				return
			}
		}
	}
}

// maxEventLine bounds one line of the event stream (a ledger line's data
// is bounded by the server's page bound of 1 MiB).
const maxEventLine = 4 << 20

// readEvents reads one SSE stream, calling emit for each event's
// LedgerLine, until the turn_settled event (settled), the end of the
// stream, or emit returning false (stop).
func readEvents(r io.Reader, emit func(LedgerLine) bool) (settled, progressed, stop bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var data strings.Builder
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if event == "call_progress" {
				data.Reset() // not a ledger line (a stream asked for progress)
			}
			if data.Len() > 0 {
				var l LedgerLine
				if err := json.Unmarshal([]byte(data.String()), &l); err != nil {
					return false, progressed, false, fmt.Errorf("client: an event's data is not a ledger line: %w", err)
				}
				progressed = true
				if !emit(l) {
					return false, true, true, nil
				}
				if l.Kind == "turn_settled" || event == "turn_settled" {
					return true, true, false, nil
				}
			}
			data.Reset()
			event = ""
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "event":
			event = value
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return false, progressed, false, err
	}
	return false, progressed, false, nil
}
