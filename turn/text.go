package turn

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Text a store cannot keep. PostgreSQL text refuses invalid UTF-8 and NUL,
// and a NUL escaped in JSON (\u0000) cannot become text either; both stores
// refuse them alike because the service checks every client-given string
// and JSON value before it is recorded.

// checkText refuses s, the value of field, when it is not UTF-8 or holds a
// NUL.
func checkText(field, s string) error {
	switch {
	case !utf8.ValidString(s):
		return invalid(field, "not valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return invalid(field, "must not contain NUL (U+0000)")
	}
	return nil
}

// checkJSONText refuses the JSON value b of field when it is not UTF-8 or
// escapes a NUL (\u0000) in one of its strings.
func checkJSONText(field string, b json.RawMessage) error {
	switch {
	case !utf8.Valid(b):
		return invalid(field, "not valid UTF-8")
	case escapesNUL(b):
		return invalid(field, `must not contain NUL (\u0000) in its strings`)
	}
	return nil
}

// escapesNUL reports whether the JSON text b holds the escape \u0000. In JSON
// a backslash appears only inside strings, where it starts an escape, so
// skipping each escape's second byte is enough to tell \\u0000 (a
// backslash, then u0000) from \u0000.
func escapesNUL(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+1 >= len(b) {
			return false
		}
		if b[i+1] == 'u' && len(b) >= i+6 && string(b[i+2:i+6]) == "0000" {
			return true
		}
		b = b[i+2:]
	}
}
