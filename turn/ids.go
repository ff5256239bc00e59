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

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newID returns prefix + 26 lowercase base32 characters (128 random bits).
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// Output ids are routed as completion keys are: "out_", 26 random
// characters, '.' and the session id, so that GET /v1/outputs/{id} finds
// the output's shard from its id alone. Ids issued before version 12 of
// the schema are "out_" and the 26 characters alone (legacy ids).
const (
	outputPrefix   = "out_"
	outputRandLen  = len(outputPrefix) + 26
	maxOutputIDLen = outputRandLen + 1 + 256
	outputRouteSep = '.'
)

// outputID returns a new output id of the session.
func outputID(sessionID string) string {
	return newID(outputPrefix) + string(outputRouteSep) + sessionID
}

// outputRoute returns the session an output id routes to: "" for a legacy
// id (or any other path id, which the store looks up as one), and ok false
// for a string that is no output id's form. A changed route names a session
// that has no output of that id.
func outputRoute(id string) (sessionID string, ok bool) {
	if len(id) > outputRandLen && id[outputRandLen] == outputRouteSep && strings.HasPrefix(id, outputPrefix) {
		sid := id[outputRandLen+1:]
		return sid, len(id) <= maxOutputIDLen && validPathID(sid) && validPathID(id[:outputRandLen])
	}
	return "", validPathID(id)
}

// validPathID reports whether id may name a session or turn: it appears in
// URL paths (and routes completion keys), so it is limited to unreserved
// characters — completion.ValidRoute's rule.
func validPathID(id string) bool { return completion.ValidRoute(id) }

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

// requestHash identifies a turn request: the calls (ids, names, canonical
// arguments), the mode and the failure policy. Reposting the same turn id
// with another hash is a conflict.
//
// Hashes are stored with turns, so the hashed bytes must never change: they
// are exactly what requestHashJSON marshals. canonWriter writes them in one
// pass into a pooled buffer, which costs a fraction of decoding every
// call's arguments into maps and marshalling them again; what it declines
// (invalid or unusual JSON) is hashed by requestHashJSON itself.
func requestHash(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) string {
	w := getCanonWriter()
	defer putCanonWriter(w)
	if !w.request(calls, mode, policy) {
		return requestHashJSON(calls, mode, policy)
	}
	sum := sha256.Sum256(w.out)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// requestHashJSON is the definition requestHash follows: the sha256 of the
// JSON encoding of the calls, each with canonicalJSON arguments, the mode
// and the policy. Arguments that are not JSON make json.Marshal fail, and
// the hash is then that of no bytes at all; requestHash keeps that too.
func requestHashJSON(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) string {
	sum := sha256.Sum256(requestJSON(calls, mode, policy, canonicalJSON))
	return hex.EncodeToString(sum[:])
}

// requestJSON is what requestHashJSON hashes, each call's arguments made
// canonical by canon (the tests pass the canonicalJSON of before
// canonWriter). nil when json.Marshal fails.
func requestJSON(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy, canon func(json.RawMessage) json.RawMessage) []byte {
	type request struct {
		Calls  []Call `json:"calls"`
		Mode   string `json:"mode"`
		Policy string `json:"policy"`
	}
	r := request{Calls: make([]Call, len(calls)), Mode: string(mode), Policy: string(policy)}
	for i, call := range calls {
		r.Calls[i] = Call{ID: call.ID, Name: call.Name, Arguments: canon(call.Arguments)}
	}
	b, _ := json.Marshal(r)
	return b
}
