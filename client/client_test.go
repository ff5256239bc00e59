package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/turnd/turnd/client"
)

func TestAgainstServer(t *testing.T) {
	t.Parallel()
	againstEachStore(t, func(t *testing.T, srv *server, c *client.Client) {
		t.Run("PostTurn", func(t *testing.T) { testPostTurn(t, c) })
		t.Run("Errors", func(t *testing.T) { testErrors(t, c) })
		t.Run("Deferred", func(t *testing.T) { testDeferred(t, srv, c) })
		t.Run("Provider", func(t *testing.T) { testProvider(t, srv, c) })
		t.Run("Listing", func(t *testing.T) { testListing(t, c) })
	})
}

// againstEachStore runs f as a parallel subtest against a turnd of its own
// on each store, with a client of it.
func againstEachStore(t *testing.T, f func(t *testing.T, srv *server, c *client.Client)) {
	t.Helper()
	for _, st := range stores() {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, st)
			f(t, srv, newClient(t, srv.URL))
		})
	}
}

func testPostTurn(t *testing.T, c *client.Client) {
	ctx := ctxFor(t)
	s, err := c.CreateSession(ctx, client.SessionRequest{ID: "post", Budget: &client.BudgetRequest{Limit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "post" || s.Budget.Limit != 64 || s.Budget.Mode != "bytes" {
		t.Errorf("session: %+v", s)
	}
	req := client.TurnRequest{Calls: []client.Call{
		{ID: "c1", Name: "now", Arguments: args(t, map[string]any{})},
		{ID: "c2", Name: "sleep", Arguments: args(t, map[string]any{"ms": 20})},
		{ID: "c3", Name: "echo", Arguments: args(t, map[string]any{"text": strings.Repeat("x", 300)})},
	}}
	turn, err := c.PostTurn(ctx, "post", req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !hasPrefix(turn.ID, "turn_") || turn.Status != client.StatusCompleted || !turn.Settled() || turn.Replayed {
		t.Errorf("turn: id %q status %q replayed %v", turn.ID, turn.Status, turn.Replayed)
	}
	var ids []string
	for _, r := range turn.Results {
		ids = append(ids, r.CallID)
		if r.Status != "ok" {
			t.Errorf("call %s: %s %+v", r.CallID, r.Status, r.Error)
		}
	}
	if !slices.Equal(ids, []string{"c1", "c2", "c3"}) {
		t.Errorf("results in order %v", ids)
	}
	if r := turn.Results[2]; !r.Truncated || r.OutputID == "" {
		t.Errorf("the oversized echo: truncated %v output_id %q", r.Truncated, r.OutputID)
	} else {
		body, ctype, err := c.Output(ctx, r.OutputID)
		if err != nil {
			t.Fatal(err)
		}
		var full struct{ Text string }
		err = json.NewDecoder(body).Decode(&full)
		body.Close()
		if err != nil || len(full.Text) != 300 || ctype != "application/json" {
			t.Errorf("full output: %d bytes, %q, %v", len(full.Text), ctype, err)
		}
	}
	req.ID = turn.ID
	again, err := c.PostTurn(ctx, "post", req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.ID != turn.ID {
		t.Errorf("reposted: replayed %v id %q", again.Replayed, again.ID)
	}
	got, err := c.Turn(ctx, "post", turn.ID)
	if err != nil || got.Status != client.StatusCompleted || len(got.Results) != 3 {
		t.Errorf("Turn: %+v %v", got, err)
	}
	tools, err := c.Tools(ctx, "post")
	if err != nil || !slices.ContainsFunc(tools, func(tl client.Tool) bool { return tl.Name == "echo" }) {
		t.Errorf("Tools: %v %v", tools, err)
	}
	var seqs []int64
	for l, err := range c.Ledger(ctx, "post", 0) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, l.Seq)
	}
	if len(seqs) < 8 || seqs[0] != 1 || seqs[len(seqs)-1] != int64(len(seqs)) {
		t.Errorf("ledger seqs %v: want 1..n, n ≥ 8", seqs)
	}
	var after []int64
	for l, err := range c.Ledger(ctx, "post", 5) {
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, l.Seq)
	}
	if !slices.Equal(after, seqs[5:]) {
		t.Errorf("ledger after 5: %v", after)
	}
}

func testErrors(t *testing.T, c *client.Client) {
	ctx := ctxFor(t)
	_, err := c.Turn(ctx, "nobody", "nothing")
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != "not_found" || !client.IsNotFound(err) {
		t.Errorf("an unknown turn: %v", err)
	}
	req := client.TurnRequest{ID: "t-conflict", Calls: []client.Call{{ID: "a", Name: "now"}}}
	if _, err := c.PostTurn(ctx, "errs", req, nil); err != nil {
		t.Fatal(err)
	}
	req.Calls[0].Name = "echo"
	_, err = c.PostTurn(ctx, "errs", req, nil)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Code != "turn_conflict" || apiErr.Detail == "" {
		t.Errorf("a conflicting repost: %v", err)
	}
	_, err = c.PostTurn(ctx, "errs", client.TurnRequest{ID: "bad id/x", Calls: []client.Call{{ID: "a", Name: "now"}}}, nil)
	if !errors.As(err, &apiErr) || apiErr.Status/100 != 4 {
		t.Errorf("a bad turn id: %v", err)
	}
}

func testDeferred(t *testing.T, srv *server, c *client.Client) {
	ctx := ctxFor(t)
	req := client.TurnRequest{ID: "approve-1", Calls: []client.Call{
		{ID: "e1", Name: "echo", Arguments: args(t, map[string]any{"text": "before"})},
		{ID: "a1", Name: "approval", Arguments: args(t, map[string]any{"prompt": "Ship it?", "deadline": "1h"})},
	}}
	turn, err := c.PostTurn(ctx, "deferred", req, &client.PostOptions{Async: true})
	if err != nil {
		t.Fatal(err)
	}
	if turn.Settled() {
		t.Fatalf("a turn with an approval settled at once: %s", turn.Status)
	}
	key := srv.completeURL(t)
	info, err := c.CompletionStatus(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != "pending" && info.Status != "issued" {
		t.Errorf("key status %q", info.Status)
	}
	if info.Status == "pending" && info.Deadline == nil {
		t.Error("a pending key without a deadline")
	}
	if _, err := c.Heartbeat(ctx, key); err != nil {
		t.Errorf("Heartbeat: %v", err)
	}
	ack, err := c.Complete(ctx, key, map[string]any{"approved": true})
	if err != nil || ack.Status != "accepted" {
		t.Fatalf("Complete: %+v %v", ack, err)
	}
	if ack, err := c.Complete(ctx, key, map[string]any{"approved": true}); err != nil || ack.Status != "already_completed" {
		t.Errorf("Complete again: %+v %v", ack, err)
	}
	_, err = c.Complete(ctx, key, map[string]any{"approved": false})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "completion_conflict" {
		t.Errorf("a different result: %v", err)
	}
	done, err := c.Await(ctx, "deferred", "approve-1")
	if err != nil || done.Status != client.StatusCompleted || string(done.Results[1].Output) != `{"approved":true}` {
		t.Fatalf("Await: %+v %v", done, err)
	}

	var kinds []string
	var seqs []int64
	for l, err := range c.Events(ctx, "deferred", "approve-1", 0) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, l.Kind)
		seqs = append(seqs, l.Seq)
	}
	if len(kinds) < 4 || kinds[0] != "turn_received" || kinds[len(kinds)-1] != "turn_settled" || !slices.Contains(kinds, "call_pending") {
		t.Errorf("events: %v", kinds)
	}
	var resumed []int64
	for l, err := range c.Events(ctx, "deferred", "approve-1", seqs[2]) {
		if err != nil {
			t.Fatal(err)
		}
		resumed = append(resumed, l.Seq)
	}
	if !slices.Equal(resumed, seqs[3:]) {
		t.Errorf("resumed after %d: %v, want %v", seqs[2], resumed, seqs[3:])
	}
	// Resumed after the last line of a settled turn: nothing, and no error.
	for l, err := range c.Events(ctx, "deferred", "approve-1", seqs[len(seqs)-1]) {
		t.Errorf("resumed after turn_settled: %+v %v", l, err)
	}
	// Stopping early ends the stream.
	n := 0
	for range c.Events(ctx, "deferred", "approve-1", 0) {
		if n++; n == 2 {
			break
		}
	}

	// An error delivery, and a cancelled turn's key answers 410.
	req2 := client.TurnRequest{ID: "approve-2", Calls: []client.Call{{ID: "a2", Name: "approval", Arguments: args(t, map[string]any{"prompt": "?"})}}}
	// Without Async the post is held until the turn leaves running.
	if w, err := c.PostTurn(ctx, "deferred", req2, nil); err != nil || w.Status != client.StatusWaiting {
		t.Fatalf("post: %+v %v", w, err)
	}
	key2 := srv.completeURL(t)
	cancelled, err := c.CancelTurn(ctx, "deferred", "approve-2")
	if err != nil || cancelled.Status != client.StatusCancelled {
		t.Fatalf("CancelTurn: %+v %v", cancelled, err)
	}
	_, err = c.CompleteError(ctx, key2, "rejected", "too late")
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusGone || apiErr.Code != "completion_gone" {
		t.Errorf("delivery after cancel: %v", err)
	}
}

// TestSignedCompletion: a server requiring signatures refuses an unsigned
// delivery with 401 bad_signature and takes one the client signed.
func TestSignedCompletion(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	srv := startServer(t, sqlite, "TURND_COMPLETION_SIGNING_SECRET="+secret)
	ctx := ctxFor(t)
	c := newClient(t, srv.URL)
	signed := newClient(t, srv.URL, client.WithSigningSecret(secret))
	req := client.TurnRequest{ID: "signed", Calls: []client.Call{{ID: "a", Name: "approval", Arguments: args(t, map[string]any{"prompt": "?"})}}}
	if _, err := c.PostTurn(ctx, "s", req, &client.PostOptions{Async: true}); err != nil {
		t.Fatal(err)
	}
	key := srv.completeURL(t)
	_, err := c.Complete(ctx, key, "yes")
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || apiErr.Code != "bad_signature" {
		t.Errorf("unsigned delivery: %v", err)
	}
	if _, err := signed.Heartbeat(ctx, key); err != nil {
		t.Errorf("signed heartbeat: %v", err)
	}
	if ack, err := signed.Complete(ctx, key, "yes"); err != nil || ack.Status != "accepted" {
		t.Fatalf("signed delivery: %+v %v", ack, err)
	}
	if turn, err := c.Await(ctx, "s", "signed"); err != nil || string(turn.Results[0].Output) != `"yes"` {
		t.Errorf("Await: %+v %v", turn, err)
	}
	if _, err := client.New(srv.URL, client.WithSigningSecret("short")); err == nil {
		t.Error("New took a signing secret the server would refuse")
	}
}

func TestNewRefusesBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"localhost:8080", "ftp://x", "http://"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) took it", u)
		}
	}
	if _, err := client.New(""); err != nil {
		t.Errorf("New(\"\"): %v", err)
	}
	_ = fmt.Sprint()
}

// testListing runs after the other subtests: the sessions they made are
// there. A turnd without the listing endpoints answers them 404 or 405
// (GET on a path only POSTed to): the test is skipped, saying so.
func testListing(t *testing.T, c *client.Client) {
	ctx := ctxFor(t)
	first, err := c.SessionsPage(ctx, client.ListOptions{Limit: 2})
	var apiErr *client.Error
	if errors.As(err, &apiErr) && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusMethodNotAllowed) {
		t.Skipf("this turnd does not serve GET /v1/sessions (%v): the listing endpoints are not on this branch yet", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Sessions) != 2 || first.NextAfter == "" {
		t.Errorf("a first page of 2: %d sessions, next_after %q", len(first.Sessions), first.NextAfter)
	}
	var ids []string
	for s, err := range c.Sessions(ctx, client.ListOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	for _, want := range []string{"post", "errs", "deferred", "prov"} {
		if !slices.Contains(ids, want) {
			t.Errorf("sessions %v: no %s", ids, want)
		}
	}
	var turns []client.TurnSummary
	for tu, err := range c.Turns(ctx, "deferred", client.ListOptions{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tu)
	}
	if len(turns) != 2 || turns[0].ID != "approve-2" || turns[1].ID != "approve-1" || turns[1].Calls != 2 {
		t.Errorf("turns of deferred, newest first: %+v", turns)
	}
	p, err := c.TurnsPage(ctx, "deferred", client.ListOptions{Status: client.StatusCancelled})
	if err != nil || len(p.Turns) != 1 || p.Turns[0].ID != "approve-2" {
		t.Errorf("cancelled turns: %+v %v", p, err)
	}
	calls, err := c.TurnCalls(ctx, "deferred", "approve-1")
	if err != nil || len(calls) != 2 || calls[1].ID != "a1" || !strings.Contains(string(calls[1].Arguments), "Ship it?") {
		t.Errorf("TurnCalls: %+v %v", calls, err)
	}
	// Nothing is parked now (the approvals were answered or cancelled).
	for pc, err := range c.Pending(ctx, client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if pc.SessionID == "deferred" {
			t.Errorf("a call still parked: %+v", pc)
		}
	}
	parked, err := c.PostTurn(ctx, "parked", client.TurnRequest{ID: "wait-1", Calls: []client.Call{
		{ID: "w1", Name: "approval", Arguments: args(t, map[string]any{"prompt": "later"})},
	}}, nil)
	if err != nil || parked.Status != "waiting" {
		t.Fatalf("a parked turn: %+v %v", parked, err)
	}
	pp, err := c.PendingPage(ctx, client.ListOptions{})
	if err != nil || len(pp.Pending) == 0 || pp.Pending[0].SessionID != "parked" || pp.Pending[0].CallID != "w1" || pp.Pending[0].Tool != "approval" {
		t.Errorf("PendingPage: %+v %v", pp, err)
	}
}
