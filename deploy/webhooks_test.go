package deploy

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/turnd/turnd/completion"
)

// turnd's Standard Webhooks signatures are checked by the specification's
// own Go library, and that library's signatures by turnd, for a freshly
// generated whsec_ secret and for the one the compose deployment ships.
func TestStandardWebhooksInterop(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	composeSecret, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose", "secrets", "turnd_webhook_secret"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"generated": completion.SigningSecretPrefix + base64.StdEncoding.EncodeToString(key),
		"compose":   strings.TrimSpace(string(composeSecret)),
	}
	body := []byte(`{"type":"turn.settled","data":{"session_id":"s","turn_id":"t","status":"completed"}}`)
	for name, secret := range secrets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ours, err := completion.NewSigner(secret)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := standardwebhooks.NewWebhook(secret)
			if err != nil {
				t.Fatalf("the official library refuses the secret: %v", err)
			}
			now := time.Now()
			id := completion.NewMessageID()

			// turnd signs, the library verifies.
			h := http.Header{}
			for k, v := range ours.Headers(id, now, body) {
				h.Set(k, v)
			}
			if err := theirs.Verify(body, h); err != nil {
				t.Errorf("the official library rejects turnd's signature: %v (headers %v)", err, h)
			}
			if err := theirs.Verify(append(bytes.Clone(body), ' '), h); err == nil {
				t.Error("the official library accepts turnd's signature of another body")
			}

			// The library signs, turnd verifies.
			sig, err := theirs.Sign(id, now, body)
			if err != nil {
				t.Fatal(err)
			}
			h = http.Header{}
			h.Set("webhook-id", id)
			h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
			h.Set("webhook-signature", sig)
			if err := ours.Verify(h, body, now, completion.DefaultTolerance); err != nil {
				t.Errorf("turnd rejects the official library's signature: %v", err)
			}
		})
	}
}
