package turn

import (
	"strings"
	"testing"
)

func TestUnparsedArguments(t *testing.T) {
	t.Parallel()
	long := `"{` + strings.Repeat("é", 300) + `"`
	tests := []struct {
		args    string
		bad     bool
		message string
	}{
		{``, false, ""},
		{`{"a":1}`, false, ""},
		{`null`, false, ""},
		{`[1]`, false, ""},
		{`"{\"a\":1}"`, false, ""}, // JSON in a string: the schema check answers
		{`"42"`, false, ""},
		{`"{\"a\": "`, true, `the arguments string is not valid JSON (unexpected end of JSON input): "{\"a\": "`},
		{`"hello"`, true, "not valid JSON"},
		{long, true, "…"},
	}
	for _, tt := range tests {
		msg, bad := unparsedArguments([]byte(tt.args))
		if bad != tt.bad || !strings.Contains(msg, tt.message) {
			t.Errorf("unparsedArguments(%.40s) = %q, %v; want %v with %q", tt.args, msg, bad, tt.bad, tt.message)
		}
		if bad && len(msg) > 400 {
			t.Errorf("message of %d bytes: the excerpt is not bounded", len(msg))
		}
	}
}
