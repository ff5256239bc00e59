package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/turnd/turnd/client"
)

// The ordinary client (ClientOrdinary): what a user's program spends on a
// turn, as the tuned client's appends, lean HTTP client and text checks
// do not.

// ordinaryTransport is http.DefaultTransport's settings with enough idle
// connections kept for n clients (its default keeps 2 per host, which
// would close most of them after each answer).
func ordinaryTransport(n int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = n + 16
	tr.MaxIdleConns = max(tr.MaxIdleConns, n+16)
	return tr
}

// Arguments of the calls, as a user's program would type them.
type (
	echoArgs struct {
		Pad string `json:"pad"`
	}
	sleepArgs struct {
		MS int64 `json:"ms"`
	}
	benchToolArgs struct {
		LatencyUS int64 `json:"latency_us"`
		Bytes     int64 `json:"bytes"`
	}
)

// turnRequest is turn i as the ordinary client sends it: the same calls
// as body(i), each call's arguments marshalled on their own.
func (r *runner) turnRequest(i int) (client.TurnRequest, error) {
	rng := r.rng(i)
	id := "t" + strconv.Itoa(i)
	t := client.TurnRequest{ID: id, Calls: make([]client.Call, r.w.Calls)}
	for k := range t.Calls {
		c := r.draw(rng)
		var args any
		switch c.name {
		case "echo":
			args = echoArgs{Pad: r.pad}
		case "sleep":
			args = sleepArgs{MS: c.n}
		default:
			args = benchToolArgs{LatencyUS: c.n, Bytes: r.w.OutputBytes}
		}
		raw, err := json.Marshal(args)
		if err != nil {
			return client.TurnRequest{}, err
		}
		t.Calls[k] = client.Call{ID: id + "." + strconv.Itoa(k), Name: c.name, Arguments: raw}
	}
	return t, nil
}

// postOrdinary marshals turn i, posts it to path and decodes the whole
// answer with encoding/json, checking it as post does.
func (r *runner) postOrdinary(ctx context.Context, path string, i int) (truncated int, kind, msg string) {
	t, err := r.turnRequest(i)
	if err != nil {
		return 0, "bad_request", err.Error()
	}
	body, err := json.Marshal(t)
	if err != nil {
		return 0, "bad_request", err.Error()
	}
	req, err := r.request(ctx, path, body)
	if err != nil {
		return 0, "bad_request", err.Error()
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return failure(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		got, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		if err != nil {
			return failure(fmt.Errorf("reading the answer: %w", err))
		}
		return r.statusFailure(resp.StatusCode, got)
	}
	var answer client.Turn
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return failure(fmt.Errorf("reading the answer: %w", err))
	}
	// Read to the end, so that the connection is kept.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return failure(fmt.Errorf("reading the answer: %w", err))
	}
	return checkTurn(&answer, r.w.Calls, func() string {
		return fmt.Sprintf("turn %s answered %s", answer.ID, answer.Status)
	})
}

// request is a POST of body to path with the headers of a turn: JSON, the
// Prefer: wait, the token.
func (r *runner) request(ctx context.Context, path string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "wait="+strconv.Itoa(r.w.waitSeconds()))
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	return req, nil
}
