package completion

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (https://www.standardwebhooks.com): the signed content
// of a message is its id, its timestamp in unix seconds and its body, joined
// by "."; the signature is HMAC-SHA256 over it with the shared key, sent as
// "v1,<standard base64>" in the webhook-signature header, several of them
// separated by spaces while a key is being rotated.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"

	// DefaultTolerance is how far a message's timestamp may be from now, in
	// either direction, before Verify refuses it as a replay or a forgery.
	DefaultTolerance = 5 * time.Minute

	// SigningSecretPrefix marks a signing secret given as base64.
	SigningSecretPrefix = "whsec_"
	// MinSigningKeySize is the least number of key bytes a base64 signing
	// secret must decode to (the spec's recommended minimum).
	MinSigningKeySize = 24
	// MinRawSigningSecret is the least length of a signing secret whose
	// bytes are the key as they are; text has less entropy per byte.
	MinRawSigningSecret = 32
)

var (
	// ErrMissingSignature: the webhook-id, webhook-timestamp or
	// webhook-signature header is absent or empty, or the timestamp is not
	// unix seconds; there is nothing to check a signature against.
	ErrMissingSignature = errors.New("completion: missing webhook signature headers")
	// ErrTimestampTolerance: the webhook-timestamp is further from now than
	// the tolerance, in the past (a replay) or in the future.
	ErrTimestampTolerance = errors.New("completion: webhook timestamp outside the tolerance")
	// ErrBadSignature: no v1 signature in webhook-signature matches.
	ErrBadSignature = errors.New("completion: bad webhook signature")
)

// HeaderGetter reads a request header; net/http's Header is one. Keys are
// asked for in lower case (HeaderID, …); http.Header.Get canonicalizes them.
type HeaderGetter interface {
	Get(key string) string
}

// Signer signs and verifies Standard Webhooks messages with one key. It is
// immutable and safe for concurrent use.
type Signer struct {
	key []byte
}

// NewSigner returns a signer for secret, surrounding white space dropped:
// "whsec_" and the standard base64 (padded or not) of a key of at least
// MinSigningKeySize bytes; without the prefix, padded standard base64 of
// such a key; or any other string of at least MinRawSigningSecret bytes,
// whose bytes are the key. Anything else fails with ErrInvalidSecret, whose
// message never includes the secret. See ARCHITECTURE.md, "Secrets".
func NewSigner(secret string) (*Signer, error) {
	secret = strings.TrimSpace(secret)
	if rest, ok := strings.CutPrefix(secret, SigningSecretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			key, err = base64.RawStdEncoding.DecodeString(rest)
		}
		if err != nil || strings.ContainsAny(rest, "\r\n") {
			return nil, fmt.Errorf("%w: signing secret after %q is not standard base64", ErrInvalidSecret, SigningSecretPrefix)
		}
		if len(key) < MinSigningKeySize {
			return nil, fmt.Errorf("%w: signing key of %d bytes, need at least %d", ErrInvalidSecret, len(key), MinSigningKeySize)
		}
		return &Signer{key: key}, nil
	}
	if key, err := base64.StdEncoding.DecodeString(secret); err == nil &&
		len(key) >= MinSigningKeySize && !strings.ContainsAny(secret, "\r\n") {
		return &Signer{key: key}, nil
	}
	if len(secret) >= MinRawSigningSecret {
		return &Signer{key: []byte(secret)}, nil
	}
	return nil, fmt.Errorf("%w: signing secret of %d characters; need %q and base64 of at least %d bytes, or a raw string of at least %d bytes",
		ErrInvalidSecret, len(secret), SigningSecretPrefix, MinSigningKeySize, MinRawSigningSecret)
}

// NewMessageID returns a fresh webhook-id: "msg_" and 26 characters
// carrying 128 random bits.
func NewMessageID() string { return "msg_" + rand.Text() }

// Sign returns the signature of a message, "v1,<standard base64>". The
// timestamp counts in whole seconds.
func (s *Signer) Sign(id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(s.mac(id, strconv.FormatInt(ts.Unix(), 10), body))
}

// Headers returns the three headers of a signed message, keyed by their
// lower-case names; set them with http.Header.Set.
func (s *Signer) Headers(id string, ts time.Time, body []byte) map[string]string {
	return map[string]string{
		HeaderID:        id,
		HeaderTimestamp: strconv.FormatInt(ts.Unix(), 10),
		HeaderSignature: s.Sign(id, ts, body),
	}
}

// Verify checks a received message: the three headers are present
// (ErrMissingSignature), the timestamp is within tolerance of now in either
// direction (ErrTimestampTolerance; a tolerance ≤ 0 means DefaultTolerance),
// and one of the space-separated "v1,…" entries of webhook-signature is the
// message's signature (ErrBadSignature). Entries of other versions and
// entries that are not base64 are skipped; each comparison is constant-time.
// The errors never include header values.
func (s *Signer) Verify(h HeaderGetter, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	switch {
	case id == "":
		return fmt.Errorf("%w: no %s", ErrMissingSignature, HeaderID)
	case ts == "":
		return fmt.Errorf("%w: no %s", ErrMissingSignature, HeaderTimestamp)
	case strings.TrimSpace(sigs) == "":
		return fmt.Errorf("%w: no %s", ErrMissingSignature, HeaderSignature)
	}
	// Only the canonical spelling: the signature covers the header text, so
	// "+1614265330" or "01614265330" would be a second name for one time.
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sec < 0 || strconv.FormatInt(sec, 10) != ts {
		return fmt.Errorf("%w: %s is not unix seconds", ErrMissingSignature, HeaderTimestamp)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sent := time.Unix(sec, 0)
	if age := now.Sub(sent); age > tolerance {
		return fmt.Errorf("%w: timestamp %v old, tolerance %v", ErrTimestampTolerance, age.Truncate(time.Second), tolerance)
	}
	if ahead := sent.Sub(now); ahead > tolerance {
		return fmt.Errorf("%w: timestamp %v ahead, tolerance %v", ErrTimestampTolerance, ahead.Truncate(time.Second), tolerance)
	}
	want := s.mac(id, ts, body)
	for entry := range strings.FieldsSeq(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrBadSignature)
}

// mac computes HMAC-SHA256 over id.timestamp.body.
func (s *Signer) mac(id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
