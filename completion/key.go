package completion

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

const (
	// SecretSize is the size in bytes of a generated [Secret] and the least
	// a parsed one may have.
	SecretSize = 32
	// KeyPrefix starts every completion key.
	KeyPrefix = "ck_"
	// KeyLen is the length of a completion key: the prefix and the unpadded
	// base64url of a 32-byte HMAC-SHA256.
	KeyLen = len(KeyPrefix) + 43
)

var (
	// ErrInvalidSecret: a secret is too short or not in an accepted form.
	// Its messages never include the secret.
	ErrInvalidSecret = errors.New("completion: invalid secret")
	// ErrMalformedKey: a string is not the form of a completion key. Its
	// messages never include the string.
	ErrMalformedKey = errors.New("completion: malformed key")
)

// keyLabel separates completion keys from any other MAC a secret might be
// used for by mistake, and versions the derivation.
const keyLabel = "turnd completion key v1"

// Secret is the server secret completion keys are derived from. It is
// generated once ([NewSecret]) and kept in the database, or given to the
// server as TURND_COMPLETION_KEY_SECRET ([ParseSecret]). Changing it changes the
// key every call would get, but keys already issued stay valid: their hashes
// are what the store holds.
type Secret []byte

// NewSecret returns SecretSize bytes from crypto/rand.
func NewSecret() (Secret, error) {
	s := make(Secret, SecretSize)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("completion: generating secret: %w", err)
	}
	return s, nil
}

// ParseSecret reads a secret as given in TURND_COMPLETION_KEY_SECRET or
// stored by [Secret.String], surrounding white space dropped: base64
// (standard or URL alphabet, padded or not) of at least SecretSize bytes is
// decoded; other text of at least SecretSize bytes is the secret as it is;
// anything shorter fails with ErrInvalidSecret. See ARCHITECTURE.md,
// "Secrets".
func ParseSecret(s string) (Secret, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSecret)
	}
	if b, ok := decodeBase64(s); ok && len(b) >= SecretSize {
		return Secret(b), nil
	}
	if len(s) >= SecretSize {
		return Secret(s), nil
	}
	return nil, fmt.Errorf("%w: %d characters; need base64 of at least %d bytes, or a raw string of at least %d bytes",
		ErrInvalidSecret, len(s), SecretSize, SecretSize)
}

// decodeBase64 decodes s in any of the four base64 variants. Line breaks,
// which the decoders skip, make the text not base64 here.
func decodeBase64(s string) ([]byte, bool) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, false
	}
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
	} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// String returns the secret in unpadded base64url, the form to store in the
// database; [ParseSecret] reads it back.
func (s Secret) String() string { return base64.RawURLEncoding.EncodeToString(s) }

// Format prints a placeholder for every verb, so that a secret passed to
// fmt, log or slog by mistake is not written out. Use [Secret.String] to
// get the encoded secret.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "completion.Secret[redacted]") }

// LogValue makes slog log a placeholder.
func (s Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// MarshalJSON writes a placeholder, for the same reason as Format: a secret
// has no business in a JSON document.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// Keyring derives completion keys from a secret. It is immutable and safe
// for concurrent use.
type Keyring struct {
	secret []byte
}

// NewKeyring returns a keyring over a copy of s, which must hold at least
// SecretSize bytes.
func NewKeyring(s Secret) (*Keyring, error) {
	if len(s) < SecretSize {
		return nil, fmt.Errorf("%w: %d bytes, need at least %d", ErrInvalidSecret, len(s), SecretSize)
	}
	return &Keyring{secret: append([]byte(nil), s...)}, nil
}

// Key returns the completion key of a call: KeyPrefix and the unpadded
// base64url of HMAC-SHA256(secret, message), where the message is a version
// label and the three ids, each preceded by its length as 8 big-endian
// bytes. The length prefixes make the encoding unambiguous: ("ab", "c", "d")
// and ("a", "bc", "d") get different keys.
func (k *Keyring) Key(sessionID, turnID, callID string) Key {
	mac := hmac.New(sha256.New, k.secret)
	mac.Write(keyMessage(sessionID, turnID, callID))
	return Key(KeyPrefix + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)))
}

// Verify reports whether key is the key of the call, recomputing it and
// comparing in constant time.
func (k *Keyring) Verify(key Key, sessionID, turnID, callID string) bool {
	return hmac.Equal([]byte(key), []byte(k.Key(sessionID, turnID, callID)))
}

func keyMessage(fields ...string) []byte {
	n := 8 + len(keyLabel)
	for _, f := range fields {
		n += 8 + len(f)
	}
	b := make([]byte, 0, n)
	for _, f := range append([]string{keyLabel}, fields...) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// Key is a completion key: KeyPrefix followed by 43 base64url characters
// (256 bits). It is a bearer credential: store its [Hash], log its
// [Key.Fingerprint]. The fmt verbs and slog print a placeholder with the
// fingerprint; string(key) is the key, and encoding/json writes it in full
// (it has to reach the tool and the external system).
type Key string

// ParseKey checks that s has the form of a completion key: KeyPrefix and 43
// characters of the base64url alphabet, without padding, whose last
// character carries no stray bits (so each 256-bit value has exactly one
// spelling, the one [Keyring.Key] produces). It fails with ErrMalformedKey
// otherwise. It says nothing about whether the key was ever issued.
//
// ParseKey reads only the caller's own input, so its timing reveals nothing
// about issued keys; still, a handler must hash and look up a malformed key
// like any other (see the package documentation).
func ParseKey(s string) (Key, error) {
	if len(s) != KeyLen {
		return "", fmt.Errorf("%w: %d characters, want %d", ErrMalformedKey, len(s), KeyLen)
	}
	if !strings.HasPrefix(s, KeyPrefix) {
		return "", fmt.Errorf("%w: no %q prefix", ErrMalformedKey, KeyPrefix)
	}
	var v int
	for i := len(KeyPrefix); i < len(s); i++ {
		if v = base64URLValue(s[i]); v < 0 {
			return "", fmt.Errorf("%w: byte %d is not base64url", ErrMalformedKey, i)
		}
	}
	// 43 characters hold 258 bits for a 256-bit MAC: the last two are zero.
	if v&3 != 0 {
		return "", fmt.Errorf("%w: non-canonical last character", ErrMalformedKey)
	}
	return Key(s), nil
}

// base64URLValue returns the 6-bit value of a base64url character, or -1.
func base64URLValue(c byte) int {
	switch {
	case 'A' <= c && c <= 'Z':
		return int(c - 'A')
	case 'a' <= c && c <= 'z':
		return int(c-'a') + 26
	case '0' <= c && c <= '9':
		return int(c-'0') + 52
	case c == '-':
		return 62
	case c == '_':
		return 63
	}
	return -1
}

// Hash returns the hash of the key, the value the store keeps.
func (k Key) Hash() Hash { return HashOf(string(k)) }

// Fingerprint is the fingerprint of the key's hash, safe for logs.
func (k Key) Fingerprint() string { return k.Hash().Fingerprint() }

// Format prints "ck_[redacted:<fingerprint>]" for every verb, so that a key
// passed to fmt, log or slog by mistake is not written out.
func (k Key) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, KeyPrefix+"[redacted:"+k.Fingerprint()+"]")
}

// LogValue makes slog log the placeholder Format prints; slog would
// otherwise write a string type out as it is in JSON.
func (k Key) LogValue() slog.Value { return slog.StringValue(fmt.Sprint(k)) }

// Hash is the SHA-256 of a key string: what is stored instead of the key.
type Hash [sha256.Size]byte

// HashOf hashes any string the way [Key.Hash] hashes a key, so that a
// handler spends the same work on a malformed key as on a well-formed one.
func HashOf(s string) Hash { return sha256.Sum256([]byte(s)) }

// Fingerprint returns the first 8 hex digits of the hash: enough to tell
// keys apart in logs and ledger lines, too little to find one.
func (h Hash) Fingerprint() string { return hex.EncodeToString(h[:4]) }

// Equal compares two hashes in constant time.
func (h Hash) Equal(o Hash) bool { return subtle.ConstantTimeCompare(h[:], o[:]) == 1 }
