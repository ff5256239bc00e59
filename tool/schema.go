package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrInvalidArguments is matched (errors.Is) by every error Spec.Validate
// returns. The error's own message is written for the model: it says what
// is wrong and where, without a prefix, so the service can send it as is.
var ErrInvalidArguments = errors.New("invalid arguments")

// argumentsError is a Validate failure; Error is the model-facing text.
type argumentsError struct{ msg string }

func (e *argumentsError) Error() string        { return e.msg }
func (e *argumentsError) Is(target error) bool { return target == ErrInvalidArguments }

// maxReportedProblems bounds the schema violations listed in one error: a
// model fixes the first few and tries again; a wall of text helps no one.
const maxReportedProblems = 3

// schemaBase is the base URI the compiled schemas live under. Nothing is
// ever fetched from it: the loader refuses every external reference, so a
// schema must be self-contained ($defs and local $ref only).
const schemaBase = "https://turnd.invalid/tools/"

// CompileSchema compiles schema (JSON Schema, draft 2020-12 unless the
// schema names its draft in $schema) and installs it as the spec's argument
// validator, replacing InputSchema. Open, Parse and the builtins do this for
// every tool; a Spec built by hand must call it to have its schema enforced.
//
// The schema must be a JSON object whose "type", if present, is "object":
// tool arguments are always an object. External $ref are refused.
func (s *Spec) CompileSchema(schema json.RawMessage) error {
	if len(bytes.TrimSpace(schema)) == 0 {
		s.InputSchema = nil
		s.validate = nil
		return nil
	}
	sch, err := compileSchema(s.Name, schema)
	if err != nil {
		return err
	}
	s.InputSchema = schema
	if acceptsAnyObject(schema) {
		s.validate = nil // Validate's object check is all it asks
		return nil
	}
	s.validate = func(args any) error {
		if err := sch.Validate(args); err != nil {
			return &argumentsError{msg: describeValidation(err)}
		}
		return nil
	}
	return nil
}

// compileSchema compiles one tool's input schema.
func compileSchema(name string, schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON Schema object, got %s", jsonKind(doc))
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, errors.New(`"type" must be "object": tool arguments are a JSON object`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	loc := schemaBase + name + "/input_schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("adding schema: %w", err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		var sv *jsonschema.SchemaValidationError
		if errors.As(err, &sv) {
			return nil, fmt.Errorf("not a valid JSON Schema: %s", describeValidation(sv.Err))
		}
		return nil, fmt.Errorf("not a valid JSON Schema: %w", err)
	}
	return sch, nil
}

// acceptsAnyObject reports whether a compiled schema accepts every JSON
// object: it says no more than "type": "object", besides annotations that
// do not validate.
func acceptsAnyObject(schema json.RawMessage) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(schema, &obj) != nil {
		return false
	}
	for k, v := range obj {
		switch k {
		case "type":
			if string(v) != `"object"` {
				return false
			}
		case "title", "description", "$comment", "examples":
		default:
			return false
		}
	}
	return true
}

// refuseLoader keeps a schema from reaching the file system or network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, errors.New("external schema references are not allowed; use $defs")
}

// normalizeArguments maps missing and null arguments to {}.
func normalizeArguments(args json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{}`)
	}
	return args
}

// isObject reports, without decoding them, whether arguments are valid
// JSON that decodeArguments accepts without error: an object, or missing or
// null.
func isObject(args json.RawMessage) bool {
	t := normalizeArguments(args)
	t = bytes.TrimLeft(t, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// decodeArguments parses arguments the way the validator wants them
// (numbers as json.Number) and checks they are an object.
func decodeArguments(args json.RawMessage) (any, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(normalizeArguments(args)))
	if err != nil {
		return nil, &argumentsError{msg: "arguments are not valid JSON: " + err.Error()}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &argumentsError{msg: "arguments must be a JSON object, got " + jsonKind(v)}
	}
	return v, nil
}

// describeValidation flattens a validation error tree into its leaves, the
// concrete violations, on one line.
func describeValidation(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	leaves := validationLeaves(ve)
	// The validator walks objects in map order; sort for a stable message.
	slices.SortStableFunc(leaves, func(a, b *jsonschema.ValidationError) int {
		return strings.Compare(jsonPointer(a.InstanceLocation), jsonPointer(b.InstanceLocation))
	})
	parts := make([]string, 0, min(len(leaves), maxReportedProblems))
	for i, l := range leaves {
		if i == maxReportedProblems {
			parts = append(parts, fmt.Sprintf("and %d more", len(leaves)-i))
			break
		}
		msg := l.BasicOutput().Error.String()
		if len(l.InstanceLocation) == 0 {
			parts = append(parts, msg)
			continue
		}
		parts = append(parts, "at "+jsonPointer(l.InstanceLocation)+": "+msg)
	}
	return strings.Join(parts, "; ")
}

// jsonPointer renders a location as an RFC 6901 pointer.
func jsonPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
