package client

import (
	"fmt"
	"net/http"
	"time"

	"github.com/turnd/turnd/completion"
)

// signer signs completion requests with Standard Webhooks, through the
// server's own implementation (package completion), so that both ends agree
// on the secret's forms and the signed content.
type signer struct {
	secret string
	s      *completion.Signer
	now    func() time.Time
}

func (s *signer) init() error {
	if s.secret == "" {
		return nil
	}
	signer, err := completion.NewSigner(s.secret)
	if err != nil {
		return fmt.Errorf("client: signing secret: %w", err)
	}
	s.s, s.secret = signer, ""
	if s.now == nil {
		s.now = time.Now
	}
	return nil
}

// sign sets the three webhook headers over body (nil signs the empty body);
// without a secret it does nothing. Each attempt gets a fresh id and
// timestamp: the server deduplicates deliveries by payload, not message id.
func (s *signer) sign(h http.Header, body []byte) {
	if s.s == nil {
		return
	}
	for k, v := range s.s.Headers(completion.NewMessageID(), s.now(), body) {
		h.Set(k, v)
	}
}
