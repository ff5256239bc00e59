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
	// KeyLen is the length of a completion key's MAC part, and of a whole
	// legacy key: the prefix and the unpadded base64url of a 32-byte
	// HMAC-SHA256.
	KeyLen = len(KeyPrefix) + 43
	// RouteSep separates a routed key's MAC part from its session id.
	RouteSep = '.'
	// MaxRouteLen is the longest session id a routed key carries (the
	// longest session id turnd accepts).
	MaxRouteLen = 256
	// MaxKeyLen is the length of the longest routed key.
	MaxKeyLen = KeyLen + 1 + MaxRouteLen
)

var (
	// ErrInvalidSecret: a secret is too short or not in an accepted form.
	// Its messages never include the secret.
	ErrInvalidSecret = errors.New("completion: invalid secret")
	// ErrMalformedKey: a string is not the form of a completion key. Its
	// messages never include the string.
	ErrMalformedKey = errors.New("completion: malformed key")
)

// The labels separate completion keys from any other MAC a secret might be
// used for by mistake, and version the derivation: v1 is the legacy key's,
// v2 the routed key's.
const (
	legacyLabel = "turnd completion key v1"
	routedLabel = "turnd completion key v2"
)

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

// Key returns the completion key of a call, routed to its session:
// KeyPrefix, the unpadded base64url of HMAC-SHA256(secret, message), then
// RouteSep and the session id. The message is the routed version label and
// the three ids, each preceded by its length as 8 big-endian bytes, so the
// MAC binds the session the key names: a key whose session part is changed
// is no key of any call. The length prefixes make the encoding unambiguous:
// ("ab", "c", "d") and ("a", "bc", "d") get different keys. sessionID must
// be a valid route ([ValidRoute]), as every session id turnd accepts is.
func (k *Keyring) Key(sessionID, turnID, callID string) Key {
	return Key(k.mac(routedLabel, sessionID, turnID, callID) + string(RouteSep) + sessionID)
}

// LegacyKey returns the key releases before routed keys gave the call:
// KeyPrefix and the MAC of the v1 label and the three ids, without a
// route. Such keys were handed out before schema version 12 and stay valid;
// the service no longer issues them.
func (k *Keyring) LegacyKey(sessionID, turnID, callID string) Key {
	return Key(k.mac(legacyLabel, sessionID, turnID, callID))
}

// KeyOf returns the key the call was given, as its stored hash tells: the
// legacy key when h is its hash, the routed key otherwise.
func (k *Keyring) KeyOf(h Hash, sessionID, turnID, callID string) Key {
	if legacy := k.LegacyKey(sessionID, turnID, callID); legacy.Hash().Equal(h) {
		return legacy
	}
	return k.Key(sessionID, turnID, callID)
}

// Verify reports whether key is the key of the call, routed or legacy,
// recomputing it and comparing in constant time.
func (k *Keyring) Verify(key Key, sessionID, turnID, callID string) bool {
	routed := hmac.Equal([]byte(key), []byte(k.Key(sessionID, turnID, callID)))
	legacy := hmac.Equal([]byte(key), []byte(k.LegacyKey(sessionID, turnID, callID)))
	return routed || legacy
}

func (k *Keyring) mac(label, sessionID, turnID, callID string) string {
	mac := hmac.New(sha256.New, k.secret)
	mac.Write(keyMessage(label, sessionID, turnID, callID))
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func keyMessage(fields ...string) []byte {
	n := 0
	for _, f := range fields {
		n += 8 + len(f)
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// ValidRoute reports whether id can route a key: 1 to MaxRouteLen
// characters that need no escaping in a URL path (the session ids turnd
// accepts).
func ValidRoute(id string) bool {
	if len(id) == 0 || len(id) > MaxRouteLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '~' || c == ':' || c == '@' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return true
}

// Key is a completion key: KeyPrefix followed by 43 base64url characters
// (256 bits), and in a routed key RouteSep and the session id. It is a bearer credential: store its [Hash], log its
// [Key.Fingerprint]. The fmt verbs and slog print a placeholder with the
// fingerprint; string(key) is the key, and encoding/json writes it in full
// (it has to reach the tool and the external system).
type Key string

// ParseKey checks that s has the form of a completion key: KeyPrefix and 43
// characters of the base64url alphabet, without padding, whose last
// character carries no stray bits (so each 256-bit value has exactly one
// spelling, the one [Keyring.Key] produces), then, in a routed key,
// RouteSep and a valid route ([ValidRoute]); a legacy key ends after the
// MAC. It fails with ErrMalformedKey otherwise. It says nothing about
// whether the key was ever issued, nor whether its route is the one its
// MAC was made for: only the store's lookup of the whole key's hash tells.
//
// ParseKey reads only the caller's own input, so its timing reveals nothing
// about issued keys; still, a handler must hash and look up a malformed key
// like any other (see the package documentation).
func ParseKey(s string) (Key, error) {
	if len(s) > KeyLen {
		if s[KeyLen] != RouteSep || !ValidRoute(s[KeyLen+1:]) {
			return "", fmt.Errorf("%w: no valid route after the MAC", ErrMalformedKey)
		}
	} else if len(s) < KeyLen {
		return "", fmt.Errorf("%w: %d characters, want at least %d", ErrMalformedKey, len(s), KeyLen)
	}
	s, route := s[:KeyLen], s[KeyLen:]
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
	return Key(s + route), nil
}

// Route returns the session id a routed key names, and false for a legacy
// key or a string that is not a key. A forged or altered route is not
// detected here: the key's hash then matches no key of that session.
func Route(s string) (sessionID string, ok bool) {
	if len(s) <= KeyLen+1 || s[KeyLen] != RouteSep || !ValidRoute(s[KeyLen+1:]) {
		return "", false
	}
	return s[KeyLen+1:], true
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
