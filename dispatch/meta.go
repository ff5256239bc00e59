package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// resolve turns a call of MetaTool into the call it names, keeping the call
// id so that the result answers the model's call. It resolves one level
// only: a meta-call naming MetaTool again is malformed, which rules out
// loops.
func resolve(c Call) (resolved Call, meta bool, bad *Outcome) {
	if c.Name != MetaTool {
		return c, false, nil
	}
	var args struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	refuse := func(format string, a ...any) (Call, bool, *Outcome) {
		o := Refused(CodeInvalidArguments, fmt.Sprintf("%s: ", MetaTool)+fmt.Sprintf(format, a...))
		return c, true, &o
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return refuse("arguments must be an object {\"name\": string, \"arguments\": object}: %v", err)
	}
	switch {
	case args.Name == nil:
		return refuse("missing \"name\"")
	case *args.Name == "":
		return refuse("empty \"name\"")
	case *args.Name == MetaTool:
		return refuse("%q cannot call itself", MetaTool)
	}
	inner := bytes.TrimSpace(args.Arguments)
	switch {
	case len(inner) == 0 || bytes.Equal(inner, []byte("null")):
		inner = []byte("{}")
	case inner[0] != '{':
		return refuse("\"arguments\" must be an object")
	}
	return Call{ID: c.ID, Name: *args.Name, Arguments: json.RawMessage(inner)}, true, nil
}
