package turn

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/turnd/turnd/dispatch"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newID returns prefix + 26 lowercase base32 characters (128 random bits).
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// validPathID reports whether id may name a session or turn: it appears in
// URL paths, so it is limited to unreserved characters.
func validPathID(id string) bool {
	if len(id) == 0 || len(id) > 256 {
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

// validCallID accepts the ids providers generate: printable UTF-8 without
// control characters, at most 256 bytes.
func validCallID(id string) bool {
	if len(id) == 0 || len(id) > 256 || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// requestHash identifies a turn request: the calls (ids, names, compacted
// arguments), the mode and the failure policy. Reposting the same turn id
// with another hash is a conflict.
func requestHash(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) string {
	type canon struct {
		Calls  []Call `json:"calls"`
		Mode   string `json:"mode"`
		Policy string `json:"policy"`
	}
	c := canon{Calls: make([]Call, len(calls)), Mode: string(mode), Policy: string(policy)}
	for i, call := range calls {
		c.Calls[i] = Call{ID: call.ID, Name: call.Name, Arguments: canonicalJSON(call.Arguments)}
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonicalJSON re-encodes a JSON value with sorted keys and no
// insignificant whitespace, so that formatting differences in a client's
// retry do not read as a conflict. Invalid JSON is returned as is.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return raw
	}
	return b
}
