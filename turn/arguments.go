package turn

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// unparsedArguments recognises the arguments of a call whose model wrote
// them as a string that is not JSON: the providers' APIs carry arguments
// as JSON text in a string (OpenAI's function.arguments), and the api keeps
// a string that does not parse as that JSON string, so that the call is
// refused alone (invalid_arguments) and the turn's other calls still run.
// It returns the refusal message.
func unparsedArguments(args json.RawMessage) (string, bool) {
	if len(args) == 0 || args[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(args, &s); err != nil {
		return "", false
	}
	var v any
	err := json.Unmarshal([]byte(s), &v)
	if err == nil {
		return "", false // a JSON-encoded value: the schema check says what is wrong
	}
	const max = 200
	excerpt := s
	if len(excerpt) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(excerpt[cut]) {
			cut--
		}
		excerpt = excerpt[:cut] + "…"
	}
	return fmt.Sprintf("the arguments string is not valid JSON (%v): %q", err, excerpt), true
}
