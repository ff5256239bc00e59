package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Resource is a parsed resource template: literal text with JSON pointers
// into a call's arguments in braces, "file:{/path}" or "db:{/table}/{/id}".
// A pointer segment "*" stands for every element of an array, so
// "file:{/paths/*}" names one resource per path. "{{" and "}}" are literal
// braces.
type Resource struct {
	src   string
	parts []resourcePart
}

// resourcePart is a literal (ptr nil) or a pointer's tokens.
type resourcePart struct {
	lit string
	ptr []string
}

// MaxResources bounds the resources one call may name, so that a call's
// arguments cannot make its scheduling cost unbounded.
const MaxResources = 256

// ParseResource parses a resource template.
func ParseResource(src string) (Resource, error) {
	r := Resource{src: src}
	var lit strings.Builder
	stars := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '{' && i+1 < len(src) && src[i+1] == '{', c == '}' && i+1 < len(src) && src[i+1] == '}':
			lit.WriteByte(c)
			i++
		case c == '}':
			return Resource{}, fmt.Errorf("resource %q: a lone } at byte %d (write }} for a literal brace)", src, i)
		case c == '{':
			end := strings.IndexByte(src[i:], '}')
			if end < 0 {
				return Resource{}, fmt.Errorf("resource %q: { at byte %d is never closed", src, i)
			}
			toks, err := parsePointer(src[i+1 : i+end])
			if err != nil {
				return Resource{}, fmt.Errorf("resource %q: %w", src, err)
			}
			for _, t := range toks {
				if t == "*" {
					stars++
				}
			}
			if lit.Len() > 0 {
				r.parts = append(r.parts, resourcePart{lit: lit.String()})
				lit.Reset()
			}
			r.parts = append(r.parts, resourcePart{ptr: toks})
			i += end
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		r.parts = append(r.parts, resourcePart{lit: lit.String()})
	}
	switch {
	case src == "":
		return Resource{}, errors.New("resource: the template is empty")
	case stars > 1:
		return Resource{}, fmt.Errorf("resource %q: at most one * (every element of an array) per template", src)
	}
	return r, nil
}

// parsePointer parses a JSON pointer (RFC 6901) that names a field, not
// the whole arguments.
func parsePointer(p string) ([]string, error) {
	if p == "" || p[0] != '/' {
		return nil, fmt.Errorf("{%s}: a pointer into the arguments starts with / (e.g. {/path})", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(t, "~0", ""), "~1", ""), "~") {
			return nil, fmt.Errorf("{%s}: ~ must be followed by 0 or 1", p)
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// String is the template as written.
func (r Resource) String() string { return r.src }

// Pointers lists the template's pointers as written ("/path").
func (r Resource) Pointers() []string {
	var out []string
	for _, p := range r.parts {
		if p.ptr != nil {
			out = append(out, jsonPointer(p.ptr))
		}
	}
	return out
}

// CheckSchema reports a pointer of r that the input schema cannot hold:
// each token must name a declared property of an object (or, for "*" or a
// number, the items of an array). A schema that allows any object, or
// none given, cannot be checked and passes.
func (r Resource) CheckSchema(schema json.RawMessage) error {
	if len(schema) == 0 {
		return nil
	}
	var root map[string]any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil // the schema's own check reports it
	}
	for _, p := range r.parts {
		if p.ptr == nil {
			continue
		}
		node := root
		for i, tok := range p.ptr {
			next, ok := schemaChild(node, tok)
			if !ok {
				return fmt.Errorf("resource %q: {%s} points to a field the input schema does not declare (%s)",
					r.src, jsonPointer(p.ptr), jsonPointer(p.ptr[:i+1]))
			}
			node = next
		}
	}
	return nil
}

// schemaChild is the subschema for token tok under node; ok is false when
// node declares a closed shape without it.
func schemaChild(node map[string]any, tok string) (map[string]any, bool) {
	if props, ok := node["properties"].(map[string]any); ok {
		if sub, ok := props[tok].(map[string]any); ok {
			return sub, true
		}
		return nil, false
	}
	if items, ok := node["items"].(map[string]any); ok {
		if _, err := strconv.Atoi(tok); err == nil || tok == "*" {
			return items, true
		}
		return nil, false
	}
	if t, _ := node["type"].(string); t == "string" || t == "number" || t == "integer" || t == "boolean" {
		return nil, false
	}
	return map[string]any{}, true // open: nothing to check below
}

// expand appends the resources r names for the decoded arguments args.
func (r Resource) expand(out []string, args any) ([]string, error) {
	prefixes := []string{""}
	for _, p := range r.parts {
		if p.ptr == nil {
			for i := range prefixes {
				prefixes[i] += p.lit
			}
			continue
		}
		vals, err := resolve(args, p.ptr, nil)
		if err != nil {
			return out, fmt.Errorf("resource %q: argument %s %w", r.src, jsonPointer(p.ptr), err)
		}
		next := make([]string, 0, len(prefixes)*len(vals))
		for _, pre := range prefixes {
			for _, v := range vals {
				next = append(next, pre+v)
			}
		}
		prefixes = next
	}
	if len(out)+len(prefixes) > MaxResources {
		return out, fmt.Errorf("resource %q: the arguments name more than %d resources", r.src, MaxResources)
	}
	return append(out, prefixes...), nil
}

// step is the member tok of v, a decoded JSON object or array (an index
// for an array), as a JSON pointer's token names it; false when v has none.
func step(v any, tok string) (any, bool) {
	switch n := v.(type) {
	case map[string]any:
		c, ok := n[tok]
		return c, ok
	case []any:
		k, err := strconv.Atoi(tok)
		if err != nil || k < 0 || k >= len(n) {
			return nil, false
		}
		return n[k], true
	}
	return nil, false
}

// resolve follows toks into v and returns the text of each value reached
// (several under a "*").
func resolve(v any, toks []string, out []string) ([]string, error) {
	for i, tok := range toks {
		if n, ok := v.([]any); ok && tok == "*" {
			for _, e := range n {
				var err error
				if out, err = resolve(e, toks[i+1:], out); err != nil {
					return out, err
				}
			}
			return out, nil
		}
		var ok bool
		if v, ok = step(v, tok); !ok {
			return out, errors.New("is missing")
		}
	}
	switch x := v.(type) {
	case string:
		return append(out, x), nil
	case json.Number:
		// One text per value: 7, 7.0 and 7e0 are one resource. Numbers past
		// float64's precision may share a text, which only orders more.
		if f, err := strconv.ParseFloat(x.String(), 64); err == nil {
			f += 0 // -0 is 0
			return append(out, strconv.FormatFloat(f, 'g', -1, 64)), nil
		}
		return append(out, x.String()), nil
	case float64:
		return append(out, strconv.FormatFloat(x, 'g', -1, 64)), nil
	case bool:
		return append(out, strconv.FormatBool(x)), nil
	case nil:
		return out, errors.New("is null, want a string, number or boolean")
	}
	return out, fmt.Errorf("is %s, want a string, number or boolean", jsonKind(v))
}

// Check is Validate and Resources from one decoding of args: the
// resources a call with valid arguments touches (nil when s declares
// none), or the error of either, matching ErrInvalidArguments.
func (s *Spec) Check(args json.RawMessage) ([]string, error) {
	if len(s.ResourceTemplates) == 0 {
		return nil, s.Validate(args)
	}
	v, err := decodeArguments(args)
	if err != nil {
		return nil, err
	}
	if s.validate != nil {
		if err := s.validate(v); err != nil {
			return nil, err
		}
	}
	return s.expand(v)
}

// Resources computes the resources a call of s with arguments args
// touches: nil when s declares none. Arguments must already have passed
// Validate; an error (a pointed field missing) matches ErrInvalidArguments
// and is fit for the model to read.
func (s *Spec) Resources(args json.RawMessage) ([]string, error) {
	if len(s.ResourceTemplates) == 0 {
		return nil, nil
	}
	v, err := decodeArguments(args)
	if err != nil {
		return nil, err
	}
	return s.expand(v)
}

// expand is the resources of the decoded arguments v.
func (s *Spec) expand(v any) ([]string, error) {
	out := make([]string, 0, len(s.ResourceTemplates))
	for _, r := range s.ResourceTemplates {
		var err error
		if out, err = r.expand(out, v); err != nil {
			return nil, &argumentsError{msg: err.Error()}
		}
	}
	return out, nil
}
