package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/turnd/turnd/client"
)

// The examples compile against the real API; they need a running turnd to
// do anything, so they print nothing checked. client_test.go runs the same
// calls against a real server.

func ExampleClient_PostTurn() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.WithToken(os.Getenv("TURND_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	turn, err := c.PostTurn(ctx, "conv-42", client.TurnRequest{Calls: []client.Call{
		{ID: "call_a", Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)},
		{ID: "call_b", Name: "now"},
	}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range turn.Results {
		fmt.Println(r.CallID, r.Status, string(r.Output))
	}
}

func ExampleClient_Await() {
	ctx := context.Background()
	c, _ := client.New("")
	turn, err := c.Await(ctx, "conv-42", "turn-2")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(turn.Status)
}

func ExampleClient_Events() {
	ctx := context.Background()
	c, _ := client.New("")
	for line, err := range c.Events(ctx, "conv-42", "turn-2", 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(line.Seq, line.Kind, string(line.Data))
	}
}

func ExampleClient_Ledger() {
	ctx := context.Background()
	c, _ := client.New("")
	for line, err := range c.Ledger(ctx, "conv-42", 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(line.Seq, line.TurnID, line.Kind)
	}
}

func ExampleClient_Complete() {
	ctx := context.Background()
	// The system holding the key needs no API token; with the server's
	// signing secret its deliveries are signed.
	c, err := client.New("http://127.0.0.1:8080", client.WithSigningSecret(os.Getenv("TURND_COMPLETION_SIGNING_SECRET")))
	if err != nil {
		log.Fatal(err)
	}
	ack, err := c.Complete(ctx, os.Getenv("COMPLETE_URL"), map[string]any{"approved": true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ack.Status) // accepted, or already_completed
}

func ExampleError() {
	ctx := context.Background()
	c, _ := client.New("")
	_, err := c.Turn(ctx, "conv-42", "no-such-turn")
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Code, apiErr.Detail)
	}
}
