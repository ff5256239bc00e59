package tool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, `
tools:
  - name: search
    input_schema:
      type: object
      properties:
        q: {type: string, minLength: 1}
        limit: {type: integer, minimum: 1, maximum: 50}
        tags: {type: array, items: {$ref: '#/$defs/tag'}}
      required: [q]
      additionalProperties: false
      $defs:
        tag: {type: string, enum: [a, b]}
    http: {url: 'http://x/'}
  - name: loose
    http: {url: 'http://x/'}
  - name: optional
    input_schema: {type: object, properties: {q: {type: string}}}
    http: {url: 'http://x/'}
  - name: anyobject
    input_schema: {type: object, description: Any object, title: T}
    http: {url: 'http://x/'}
`)
	search, loose, optional := lookup(t, reg, "search"), lookup(t, reg, "loose"), lookup(t, reg, "optional")
	anyObject := lookup(t, reg, "anyobject")
	tests := []struct {
		name string
		spec *Spec
		args string
		want string // "" for valid; else the exact error message
	}{
		{"valid", search, `{"q": "go", "limit": 10, "tags": ["a"]}`, ""},
		{"integral float is an integer", search, `{"q": "go", "limit": 10.0}`, ""},
		{"wrong type", search, `{"q": 5}`, "at /q: got number, want string"},
		{"missing required", search, `{}`, "missing property 'q'"},
		{"null is {}", search, `null`, "missing property 'q'"},
		{"empty is {}", search, ``, "missing property 'q'"},
		{"extra property", search, `{"q": "x", "page": 2}`, "additional properties 'page' not allowed"},
		{"out of range", search, `{"q": "x", "limit": 51}`, "at /limit: maximum: got 51, want 50"},
		{"through $ref", search, `{"q": "x", "tags": ["c"]}`, "at /tags/0: value must be one of 'a', 'b'"},
		{"several problems", search, `{"q": "", "limit": 0, "tags": [1, 2], "x": 1}`,
			"additional properties 'x' not allowed; at /limit: minimum: got 0, want 1; at /q: minLength: got 0, want 1; and 2 more"},
		{"not JSON", search, `{"q": `, "arguments are not valid JSON: unexpected EOF"},
		{"trailing garbage", search, `{"q": "x"} x`, "arguments are not valid JSON: invalid character after top-level value"},
		{"array", search, `["q"]`, "arguments must be a JSON object, got array"},
		{"no schema: object", loose, `{"anything": [1, {"x": null}]}`, ""},
		{"no schema: null", loose, `null`, ""},
		{"no schema: string", loose, `"q"`, "arguments must be a JSON object, got string"},
		{"no schema: not JSON", loose, `{`, "arguments are not valid JSON: unexpected EOF"},
		{"optional: null", optional, ` null `, ""},
		// A schema that only says "object" is checked without decoding;
		// the errors are the same.
		{"any object: object", anyObject, ` {"a": [1, {"b": null}], "a": "\u00e9"} `, ""},
		{"any object: empty", anyObject, ``, ""},
		{"any object: null", anyObject, `null`, ""},
		{"any object: string", anyObject, `"q"`, "arguments must be a JSON object, got string"},
		{"any object: number", anyObject, ` 1 `, "arguments must be a JSON object, got number"},
		{"any object: not JSON", anyObject, `{"a":`, "arguments are not valid JSON: unexpected EOF"},
		{"any object: trailing garbage", anyObject, `{} {}`, "arguments are not valid JSON: invalid character after top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.spec.Validate(json.RawMessage(tt.args))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate(%s) = %v, want nil", tt.args, err)
			case tt.want != "" && err == nil:
				t.Errorf("Validate(%s) = nil, want %q", tt.args, tt.want)
			case tt.want != "" && err.Error() != tt.want:
				t.Errorf("Validate(%s) = %q, want %q", tt.args, err, tt.want)
			case err != nil && !errors.Is(err, ErrInvalidArguments):
				t.Errorf("error %v is not ErrInvalidArguments", err)
			}
		})
	}
}

func TestAcceptsAnyObject(t *testing.T) {
	t.Parallel()
	for schema, want := range map[string]bool{
		`{}`:                true,
		`{"type":"object"}`: true,
		`{"type":"object","description":"x","title":"t","$comment":"c","examples":[{}]}`: true,
		`{"type":["object"]}`:                                   false,
		`{"type":"object","properties":{}}`:                     false,
		`{"type":"object","additionalProperties":false}`:        false,
		`{"required":["a"]}`:                                    false,
		`{"$ref":"#/$defs/a","$defs":{"a":{}}}`:                 false,
		`{"$schema":"http://json-schema.org/draft-07/schema#"}`: false,
		`[]`: false,
	} {
		if got := acceptsAnyObject(json.RawMessage(schema)); got != want {
			t.Errorf("acceptsAnyObject(%s) = %v, want %v", schema, got, want)
		}
	}
}

// FuzzIsObject: the check without decoding accepts only what decoding
// accepts as an object.
func FuzzIsObject(f *testing.F) {
	for _, s := range []string{``, `null`, ` {} `, `{"a":1}`, `{"a":`, `{} x`, `[]`, `"s"`, "{\"\xff\":1}", `{"a":{"b":[1,2,{"c":null}]}}`, ` nul`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast := isObject(b)
		_, err := decodeArguments(b)
		if fast && err != nil {
			t.Fatalf("isObject(%q) = true, decodeArguments: %v", b, err)
		}
		if !fast && err == nil {
			t.Fatalf("isObject(%q) = false, decodeArguments accepts it", b)
		}
	})
}

func TestCompileSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		schema string
		err    string
	}{
		{`{"type": "object"}`, ""},
		{`{}`, ""},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"type": "integer"}}}`, ""},
		{`{"type": "array"}`, `"type" must be "object"`},
		{`true`, "must be a JSON Schema object, got boolean"},
		{`{"type": "object"`, "not valid JSON"},
		{`{"properties": {"a": {"$ref": "https://example.com/a.json"}}}`, "external schema references are not allowed"},
		{`{"properties": {"a": {"minimum": "1"}}}`, "at /properties/a/minimum: got string, want number"},
	}
	for _, tt := range tests {
		s := &Spec{Name: "t"}
		err := s.CompileSchema(json.RawMessage(tt.schema))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("CompileSchema(%s) = %v", tt.schema, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("CompileSchema(%s) = %v, want %q", tt.schema, err, tt.err)
		case tt.err == "" && string(s.InputSchema) != tt.schema:
			t.Errorf("InputSchema = %s", s.InputSchema)
		}
	}

	// A hand-built spec enforces its schema once compiled.
	s := &Spec{Name: "hand"}
	if err := s.CompileSchema(json.RawMessage(`{"type": "object", "required": ["a"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(nil); err == nil || err.Error() != "missing property 'a'" {
		t.Errorf("Validate(nil) = %v", err)
	}
	if err := s.CompileSchema(nil); err != nil || s.Validate(nil) != nil || s.InputSchema != nil {
		t.Errorf("CompileSchema(nil) should drop the schema: %v", err)
	}
}
