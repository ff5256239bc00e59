package tool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/turnd/turnd/dispatch"
)

// progressStreamType is the content type of an HTTP tool's answer that
// reports progress before its result: NDJSON, one JSON object a line,
//
//	{"progress": {"progress": 1, "total": 3, "message": "fetching"}}
//	{"progress": {"progress": 2, "total": 3}}
//	{"output": ...}          (or {"error": ...}, or {"pending": ...})
//
// Progress lines go to the call's ProgressReporter; the first other line
// is the answer, as an application/json body would be, and ends the
// stream (anything after it is ignored). Blank lines are skipped, so a
// tool may send them to keep a connection alive.
const progressStreamType = "application/x-ndjson"

// progressLine is a line of a progress stream: progress, or the answer.
type progressLine struct {
	Progress *Progress       `json:"progress"`
	Output   json.RawMessage `json:"output"`
	Error    json.RawMessage `json:"error"`
	Pending  json.RawMessage `json:"pending"`
}

// readProgressStream reads an answer of progressStreamType: see there.
// Each line is bounded by the keep cap, as a JSON answer is.
func (t *httpTool) readProgressStream(ctx context.Context, resp *http.Response, d *deferral, callID string) dispatch.Outcome {
	rep := progressFrom(ctx)
	limit := keepCap(ctx)
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	for {
		line, err := readLine(br, limit)
		if errors.Is(err, errLineTooLong) {
			return dispatch.Fail(CodeOutputTooLarge, fmt.Sprintf("a line of the tool's progress stream exceeds %d bytes", limit))
		}
		if err != nil && (err != io.EOF || len(bytes.TrimSpace(line)) == 0) {
			if err == io.EOF {
				return dispatch.Fail(CodeInvalidToolResponse, "the tool's progress stream ended without an answer line")
			}
			return t.failure(ctx, err, "reading the response failed")
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var pl progressLine
		if jerr := json.Unmarshal(line, &pl); jerr != nil {
			return dispatch.Fail(CodeInvalidToolResponse, "a line of the tool's progress stream is not a JSON object: "+jerr.Error())
		}
		if pl.Progress == nil {
			return t.streamAnswer(resp.StatusCode, line, d)
		}
		if pl.Output != nil || pl.Error != nil || pl.Pending != nil {
			return dispatch.Fail(CodeInvalidToolResponse, `a line of the tool's progress stream has "progress" together with an answer`)
		}
		if p := *pl.Progress; rep != nil && validProgress(p) {
			p.Message = truncateUTF8(p.Message, maxProgressMessage)
			rep.CallProgress(callID, p)
		}
	}
}

// streamAnswer is the outcome of a progress stream's answer line, read as
// a JSON answer is (readJSON).
func (t *httpTool) streamAnswer(status int, line []byte, d *deferral) dispatch.Outcome {
	r, msg := decodeEnvelope(line)
	switch {
	case msg != "":
		return dispatch.Fail(CodeInvalidToolResponse, msg)
	case r.pending != nil:
		return t.pendingAnswer(status, r.pending, d)
	case r.err != nil:
		return dispatch.Fail(r.err.Code, r.err.Message)
	}
	return dispatch.OK(r.output, true)
}

// validProgress reports whether p's numbers are finite and not negative.
func validProgress(p Progress) bool {
	ok := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 }
	return ok(p.Progress) && ok(p.Total)
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line of at most limit bytes (without its newline);
// at the end of the stream it returns what is left with io.EOF.
func readLine(br *bufio.Reader, limit int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > limit+1 {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}
