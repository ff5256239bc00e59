package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Turns measures turnd's turn throughput: clients goroutines each post
// turns to a session of their own,
//
//	POST {baseURL}/v1/sessions/{session}/turns
//
// in a tight loop for d, and every answer must be 200 with the turn
// completed and one ok result per call of the request. body(i) is the i-th
// request body, of calls calls (the clients count the results of most
// answers without decoding the request; every FullCheckEvery-th request is
// decoded and must have that many); i counts up from 0 across all clients, so it can make turn
// and call ids unique (a call id seen before in the session would be
// replayed, not run — see EchoTurn). The sessions are new (named for the
// run), each created by its client's first turn, which runs before the
// window opens along with the connection set-up.
//
// The clients share one Client, which keeps a connection per client alive,
// so the window measures requests, not TCP handshakes.
func Turns(ctx context.Context, baseURL string, clients int, d time.Duration, calls int, body func(i int) []byte) (Result, error) {
	client, err := NewClient(baseURL, ClientOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("turns: %w", err)
	}
	defer client.Close()
	base := "/v1/sessions/lt-" + randomID(4) + "-"
	paths := make([]string, clients)
	bufs := make([][]byte, clients)
	for c := range paths {
		paths[c] = base + strconv.Itoa(c) + "/turns"
	}
	var next atomic.Int64
	op := func(ctx context.Context, c int) error {
		i := int(next.Add(1) - 1)
		var err error
		bufs[c], err = postTurn(ctx, client, paths[c], body(i), calls, bufs[c][:0], i%FullCheckEvery == 0)
		return err
	}
	r, err := Loop(ctx, clients, d, op, op)
	if err != nil {
		return r, fmt.Errorf("turns: %w", err)
	}
	return r, nil
}

// FullCheckEvery: one answer in this many is decoded and checked in full;
// the others by QuickCheck, so that checking takes little of the CPU the
// clients share with the server (any answer QuickCheck doubts is decoded
// too). Turns and turnd bench both check so.
const FullCheckEvery = 8

// postTurn posts one turn of calls calls and checks its answer: 200,
// completed, every call answered ok (with full, one ok result per call,
// and the request's calls counted). It reads the answer into buf and
// returns it.
func postTurn(ctx context.Context, client *Client, path string, body []byte, calls int, buf []byte, full bool) ([]byte, error) {
	status, got, err := client.Post(ctx, path, body, buf)
	if err != nil {
		return got, err
	}
	if status != http.StatusOK {
		return got, fmt.Errorf("answer %d: %.300s", status, got)
	}
	if !full && QuickCheck(got, calls) {
		return got, nil
	}
	var sent struct {
		Calls []struct{} `json:"calls"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		return got, fmt.Errorf("request body: %w", err)
	}
	if len(sent.Calls) != calls {
		return got, fmt.Errorf("request body has %d calls, the workload %d", len(sent.Calls), calls)
	}
	var t struct {
		Status  string `json:"status"`
		Results []struct {
			CallID string `json:"call_id"`
			Status string `json:"status"`
		} `json:"results"`
	}
	if err := json.Unmarshal(got, &t); err != nil {
		return got, fmt.Errorf("answer: %w", err)
	}
	if t.Status != "completed" || len(t.Results) != calls {
		return got, fmt.Errorf("turn %s with %d results for %d calls: %.300s", t.Status, len(t.Results), calls, got)
	}
	for _, res := range t.Results {
		if res.Status != "ok" {
			return got, fmt.Errorf("call %s answered %s: %.300s", res.CallID, res.Status, got)
		}
	}
	return got, nil
}

// QuickCheck reports, without decoding it, whether a native turn answer
// reads as completed with calls results, every one ok: its text has the
// turn's "status":"completed" and after it calls statuses, all
// "status":"ok". turnd writes JSON without spaces and outputs as JSON
// values, in which a string holding those words has its quotes escaped; an
// output object with such a member could mislead it, which the full checks
// catch.
func QuickCheck(answer []byte, calls int) bool {
	turn := bytes.Index(answer, []byte(`"status":"`))
	if turn < 0 || !bytes.HasPrefix(answer[turn:], []byte(`"status":"completed"`)) {
		return false
	}
	rest := answer[turn+len(`"status":"completed"`):]
	return bytes.Count(rest, []byte(`"status":"`)) == calls && bytes.Count(rest, []byte(`"status":"ok"`)) == calls
}

// EchoTurn returns a body function for Turns: turn i is
//
//	{"id":"t<i>","calls":[{"id":"t<i>.0","name":"echo","arguments":{"n":<i>,"k":0}}, …]}
//
// with calls calls of the builtin echo tool (a read, answered at once), so
// turnd runs them all concurrently in one wave and the measurement is
// turnd's own overhead. Call ids are unique per turn, so nothing is
// replayed.
func EchoTurn(calls int) func(i int) []byte { return ToolTurn("echo", calls) }

// ToolTurn returns a body function: turn i is
//
//	{"id":"t<i>","calls":[{"id":"t<i>.0","name":"<tool>","arguments":{"n":<i>,"k":0}}, …]}
//
// with calls calls of tool.
func ToolTurn(tool string, calls int) func(i int) []byte {
	return func(i int) []byte {
		b := make([]byte, 0, 32+(48+len(tool))*calls)
		return AppendTurn(b, i, calls, func(b []byte, k int) []byte {
			b = append(b, tool...)
			b = append(b, `","arguments":{"n":`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `,"k":`...)
			b = strconv.AppendInt(b, int64(k), 10)
			return append(b, "}}"...)
		})
	}
}

// AppendTurn appends turn i's body, {"id":"t<i>","calls":[…]}, with calls
// calls whose ids are t<i>.<k> (unique per turn, so nothing is replayed).
// call appends the rest of call k after its `"name":"`: the name, its
// closing quote, the arguments and the call's closing brace.
func AppendTurn(b []byte, i, calls int, call func(b []byte, k int) []byte) []byte {
	id := strconv.AppendInt([]byte("t"), int64(i), 10)
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","calls":[`...)
	for k := range calls {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = append(b, id...)
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, `","name":"`...)
		b = call(b, k)
	}
	return append(b, "]}"...)
}
