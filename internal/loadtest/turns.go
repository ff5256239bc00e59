package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
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
// request body; i counts up from 0 across all clients, so it can make turn
// and call ids unique (a call id seen before in the session would be
// replayed, not run — see EchoTurn). The sessions are new (named for the
// run), each created by its client's first turn, which runs before the
// window opens along with the connection set-up.
//
// The clients share one http.Transport that keeps a connection per client
// alive, so the window measures requests, not TCP handshakes.
func Turns(ctx context.Context, baseURL string, clients int, d time.Duration, body func(i int) []byte) (Result, error) {
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * clients,
		MaxIdleConnsPerHost: 2 * clients,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: time.Minute}

	base := strings.TrimSuffix(baseURL, "/") + "/v1/sessions/lt-" + randomID(4) + "-"
	urls := make([]string, clients)
	for c := range urls {
		urls[c] = base + strconv.Itoa(c) + "/turns"
	}
	var next atomic.Int64
	op := func(ctx context.Context, c int) error {
		return postTurn(ctx, client, urls[c], body(int(next.Add(1)-1)))
	}
	r, err := Loop(ctx, clients, d, op, op)
	if err != nil {
		return r, fmt.Errorf("turns: %w", err)
	}
	return r, nil
}

// postTurn posts one turn and checks its answer: 200, completed, every
// call answered ok.
func postTurn(ctx context.Context, client *http.Client, url string, body []byte) error {
	var sent struct {
		Calls []struct{} `json:"calls"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("reading answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answer %d: %.300s", resp.StatusCode, got)
	}
	var t struct {
		Status  string `json:"status"`
		Results []struct {
			CallID string `json:"call_id"`
			Status string `json:"status"`
		} `json:"results"`
	}
	if err := json.Unmarshal(got, &t); err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	if t.Status != "completed" || len(t.Results) != len(sent.Calls) {
		return fmt.Errorf("turn %s with %d results for %d calls: %.300s", t.Status, len(t.Results), len(sent.Calls), got)
	}
	for _, res := range t.Results {
		if res.Status != "ok" {
			return fmt.Errorf("call %s answered %s: %.300s", res.CallID, res.Status, got)
		}
	}
	return nil
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
