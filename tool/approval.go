package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/turnd/turnd/dispatch"
)

// Approval is a policy saying which calls wait for a person's decision
// before their tool runs (config approval:, a session's approval). The
// zero value needs no approval.
type Approval struct {
	// Always: every call needs approval.
	Always bool
	// When: a call needs approval when any rule matches it.
	When []ApprovalRule
	// Tools (a session's policy only): calls of these tools need
	// approval.
	Tools []string
}

// ApprovalRule is one rule of an approval policy's when: list: over a
// tool's hint (Annotation) or over a call's arguments (Pointer, with
// Equals or Matches).
type ApprovalRule struct {
	// Annotation names an MCP tool hint: destructiveHint, readOnlyHint,
	// openWorldHint or idempotentHint. The rule matches when the hint's
	// value is Equals (true when Equals is empty).
	Annotation string `json:"annotation,omitempty"`
	// Pointer is a JSON pointer (RFC 6901) into the arguments.
	Pointer string `json:"pointer,omitempty"`
	// Equals is the JSON value the hint or the argument must equal.
	Equals json.RawMessage `json:"equals,omitempty"`
	// Matches is an RE2 regular expression a string argument must match
	// (unanchored: use ^…$ for the whole value).
	Matches string `json:"matches,omitempty"`

	toks   []string
	equals any
	re     *regexp.Regexp
}

// Hints are what a tool says of itself, the MCP tool annotations: a
// missing hint takes the MCP default (destructive and open world, neither
// read-only nor idempotent).
type Hints struct {
	ReadOnly, Destructive, Idempotent, OpenWorld *bool
}

// hint names, as MCP spells them.
var hintNames = []string{"destructiveHint", "readOnlyHint", "openWorldHint", "idempotentHint"}

// value is the named hint's value, its MCP default when unset.
func (h Hints) value(name string) bool {
	pick := func(p *bool, def bool) bool {
		if p == nil {
			return def
		}
		return *p
	}
	switch name {
	case "destructiveHint":
		return pick(h.Destructive, true)
	case "readOnlyHint":
		return pick(h.ReadOnly, false)
	case "openWorldHint":
		return pick(h.OpenWorld, true)
	case "idempotentHint":
		return pick(h.Idempotent, false)
	}
	return false
}

// ErrInvalidApproval is matched by the errors of ParseApproval.
var ErrInvalidApproval = errors.New("invalid approval policy")

// approvalError is a policy problem; Field is where ("when[0].pointer").
type approvalError struct{ field, msg string }

func (e *approvalError) Error() string {
	if e.field == "" {
		return e.msg
	}
	return e.field + ": " + e.msg
}
func (e *approvalError) Is(target error) bool { return target == ErrInvalidApproval }

// ParseApproval reads a session's approval policy from JSON: "always",
// "never", or {"tools": [...], "when": [rules]}; see docs/config.md,
// "Approvals". Errors match ErrInvalidApproval and name the field.
func ParseApproval(raw json.RawMessage) (Approval, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Approval{}, nil
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return Approval{}, &approvalError{msg: "not valid JSON: " + err.Error()}
	}
	return approvalOf(v, true)
}

// approvalOf builds a policy from a decoded value (YAML or JSON);
// session says whether tools: is allowed.
func approvalOf(v any, session bool) (Approval, error) {
	switch x := v.(type) {
	case string:
		switch x {
		case "always":
			return Approval{Always: true}, nil
		case "never":
			return Approval{}, nil
		}
		return Approval{}, &approvalError{msg: fmt.Sprintf("%q must be never, always or {when: [rules]}", x)}
	case map[string]any:
		var a Approval
		for k, val := range x {
			switch {
			case k == "when":
				rules, err := rulesOf(val)
				if err != nil {
					return Approval{}, err
				}
				a.When = rules
			case k == "tools" && session:
				list, ok := val.([]any)
				if !ok {
					return Approval{}, &approvalError{field: "tools", msg: "must be a list of tool names"}
				}
				for j, n := range list {
					s, ok := n.(string)
					if !ok || !namePattern.MatchString(s) {
						return Approval{}, &approvalError{field: fmt.Sprintf("tools[%d]", j), msg: "must be a tool name"}
					}
					a.Tools = append(a.Tools, s)
				}
			default:
				want := "when"
				if session {
					want = "tools and when"
				}
				return Approval{}, &approvalError{field: k, msg: "unknown key; an approval policy has " + want}
			}
		}
		if len(a.When) == 0 && len(a.Tools) == 0 {
			return Approval{}, &approvalError{msg: "an approval object needs a non-empty when: list (or use never / always)"}
		}
		return a, nil
	case nil:
		return Approval{}, nil
	}
	return Approval{}, &approvalError{msg: "must be never, always or {when: [rules]}"}
}

// MaxApprovalRules bounds a policy's when: list.
const MaxApprovalRules = 64

func rulesOf(v any) ([]ApprovalRule, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, &approvalError{field: "when", msg: "must be a non-empty list of rules"}
	}
	if len(list) > MaxApprovalRules {
		return nil, &approvalError{field: "when", msg: fmt.Sprintf("%d rules, more than %d", len(list), MaxApprovalRules)}
	}
	out := make([]ApprovalRule, 0, len(list))
	for j, item := range list {
		r, err := ruleOf(item)
		if err != nil {
			var ae *approvalError
			if errors.As(err, &ae) {
				f := "when[" + strconv.Itoa(j) + "]"
				if ae.field != "" {
					f += "." + ae.field
				}
				return nil, &approvalError{field: f, msg: ae.msg}
			}
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func ruleOf(v any) (ApprovalRule, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return ApprovalRule{}, &approvalError{msg: "a rule is {annotation: <hint>} or {pointer: /field, equals: <value> | matches: <regexp>}"}
	}
	var r ApprovalRule
	_, hasEquals := m["equals"]
	for k, val := range m {
		switch k {
		case "annotation":
			s, _ := val.(string)
			if !slices.Contains(hintNames, s) {
				return r, &approvalError{field: "annotation", msg: fmt.Sprintf("must be one of %s", strings.Join(hintNames, ", "))}
			}
			r.Annotation = s
		case "pointer":
			s, _ := val.(string)
			toks, err := parsePointer(s)
			if err != nil {
				return r, &approvalError{field: "pointer", msg: strings.TrimPrefix(err.Error(), "{"+s+"}: ")}
			}
			r.Pointer, r.toks = s, toks
		case "equals":
			b, err := json.Marshal(val)
			if err != nil {
				return r, &approvalError{field: "equals", msg: "cannot be written as JSON"}
			}
			r.Equals = b
			r.equals = decodeLoose(b)
		case "matches":
			s, ok := val.(string)
			if !ok {
				return r, &approvalError{field: "matches", msg: "must be a regular expression string"}
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return r, &approvalError{field: "matches", msg: err.Error()}
			}
			r.Matches, r.re = s, re
		default:
			return r, &approvalError{field: k, msg: "unknown key; a rule has annotation, or pointer with equals or matches"}
		}
	}
	switch {
	case r.Annotation != "" && r.Pointer != "":
		return r, &approvalError{msg: "a rule is over an annotation or over an argument (pointer), not both"}
	case r.Annotation != "":
		if r.re != nil {
			return r, &approvalError{field: "matches", msg: "goes with pointer; an annotation rule takes equals: true or false"}
		}
		if hasEquals {
			if _, ok := r.equals.(bool); !ok {
				return r, &approvalError{field: "equals", msg: "an annotation is true or false"}
			}
		} else {
			r.equals = true
		}
	case r.Pointer != "":
		if hasEquals == (r.re != nil) {
			return r, &approvalError{msg: "a pointer rule takes exactly one of equals and matches"}
		}
	default:
		return r, &approvalError{msg: "a rule needs annotation or pointer"}
	}
	return r, nil
}

// decodeLoose decodes JSON with numbers as float64, the one form equality
// compares (7 and 7.0 are equal).
func decodeLoose(b []byte) any {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	return v
}

// IsZero reports whether the policy never asks for approval.
func (a Approval) IsZero() bool { return !a.Always && len(a.When) == 0 && len(a.Tools) == 0 }

// Needs reports whether a call of spec with args (already valid JSON)
// needs approval under a, and why ("always", "tool delete_file",
// "destructiveHint", "/path matches ^/etc/").
func (a Approval) Needs(spec *Spec, args json.RawMessage) (why string, needs bool) {
	if a.Always {
		return "always", true
	}
	if slices.Contains(a.Tools, spec.Name) {
		return "tool " + spec.Name, true
	}
	var decoded any
	haveArgs := false
	for i := range a.When {
		r := &a.When[i]
		if r.Annotation != "" {
			if spec.hints().value(r.Annotation) == r.equals.(bool) {
				return r.String(), true
			}
			continue
		}
		if !haveArgs {
			decoded, haveArgs = decodeLoose(args), true
		}
		v, ok := pointAt(decoded, r.toks)
		if !ok {
			continue
		}
		if r.re != nil {
			if s, isStr := v.(string); isStr && r.re.MatchString(s) {
				return r.String(), true
			}
			continue
		}
		if reflect.DeepEqual(v, r.equals) {
			return r.String(), true
		}
	}
	return "", false
}

// String is the rule as a short text for the ledger and the approver.
func (r ApprovalRule) String() string {
	switch {
	case r.Annotation != "":
		if b, _ := r.equals.(bool); !b {
			return r.Annotation + " is false"
		}
		return r.Annotation
	case r.re != nil:
		return r.Pointer + " matches " + r.Matches
	}
	return r.Pointer + " equals " + string(r.Equals)
}

// pointAt follows toks into v.
func pointAt(v any, toks []string) (any, bool) {
	for _, tok := range toks {
		var ok bool
		if v, ok = step(v, tok); !ok {
			return nil, false
		}
	}
	return v, true
}

// hints are the spec's MCP annotations when its server's are trusted, and
// otherwise what its config says: a read tool is read-only and not
// destructive, a write tool destructive; idempotent as configured.
func (s *Spec) hints() Hints {
	if s.Hints != nil {
		return *s.Hints
	}
	ro := s.Effect == dispatch.EffectRead
	destructive := !ro
	idem := s.Idempotent
	return Hints{ReadOnly: &ro, Destructive: &destructive, Idempotent: &idem}
}

// NeedsApproval reports whether a call of s with args needs approval under
// the tool's policy (config approval:, or the config's default).
func (s *Spec) NeedsApproval(args json.RawMessage) (why string, needs bool) {
	if s.Approval == nil {
		return "", false
	}
	return s.Approval.Needs(s, args)
}

// approval checks an entry's approval: value at path; nil when it is
// absent or has problems (recorded), and a zero policy for never.
func (e entry) approval(raw any, path ...any) *Approval {
	if raw == nil {
		return nil
	}
	a, err := approvalOf(raw, false)
	if err != nil {
		e.fail(e.at(path...), "approval: %v", err)
		return nil
	}
	return &a
}

// defaultApproval checks the config's top-level approval: value.
func (l *loader) defaultApproval(raw any) *Approval {
	a, err := approvalOf(raw, false)
	if err != nil {
		l.fail(l.pos("approval"), "", "approval: %v", err)
		return nil
	}
	return &a
}

// MarshalJSON writes the policy as ParseApproval reads it.
func (a Approval) MarshalJSON() ([]byte, error) {
	switch {
	case a.Always:
		return []byte(`"always"`), nil
	case a.IsZero():
		return []byte(`"never"`), nil
	}
	return json.Marshal(struct {
		Tools []string       `json:"tools,omitempty"`
		When  []ApprovalRule `json:"when,omitempty"`
	}{a.Tools, a.When})
}
