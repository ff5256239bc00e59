package tool

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

//go:embed turnd.schema.json
var configSchemaJSON []byte

// ConfigSchema returns the JSON Schema (draft 2020-12) of the tool config
// file, as editors and `turnd check-config` use it. Every file Open
// accepts is valid against it; the loader checks more (positive durations,
// unique names, set environment variables, an existing mcp.cwd).
func ConfigSchema() []byte { return bytes.Clone(configSchemaJSON) }

// configSchemaURL names the compiled schema; nothing is fetched from it.
const configSchemaURL = schemaBase + "turnd.schema.json"

// configSchemaDoc is the embedded schema, decoded.
var configSchemaDoc = sync.OnceValues(func() (any, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(configSchemaJSON))
	if err != nil {
		return nil, fmt.Errorf("tool: the config schema is not JSON: %w", err)
	}
	return doc, nil
})

// compiledConfigSchema compiles the embedded schema once.
var compiledConfigSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := configSchemaDoc()
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(configSchemaURL, doc); err != nil {
		return nil, fmt.Errorf("tool: adding the config schema: %w", err)
	}
	return c.Compile(configSchemaURL)
})

// schemaReason is the description of the nearest subschema that holds
// the false schema at url (".../else/properties/pending"): why the key is
// not allowed there; "" when none has one.
func schemaReason(url string) string {
	_, frag, _ := strings.Cut(url, "#")
	doc, err := configSchemaDoc()
	if err != nil || frag == "" {
		return ""
	}
	tokens := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	reason := ""
	for _, t := range tokens[:len(tokens)-1] {
		m, ok := doc.(map[string]any)
		if !ok {
			return ""
		}
		if d, ok := m["description"].(string); ok {
			reason = d
		}
		doc = m[t]
	}
	return reason
}

// schemaProblems validates l.body against the config schema and returns
// each violation as a *ConfigError at the place it is about.
func (l *loader) schemaProblems() ([]*ConfigError, error) {
	if l.body == nil {
		return nil, nil
	}
	sch, err := compiledConfigSchema()
	if err != nil {
		return nil, err
	}
	doc, err := jsonValue(l.body)
	if err != nil {
		return []*ConfigError{l.problemAt(l.pos(), "schema: %v", err)}, nil
	}
	var ve *jsonschema.ValidationError
	if err := sch.Validate(doc); !errors.As(err, &ve) {
		return nil, err
	}
	var out []*ConfigError
	for _, leaf := range validationLeaves(ve) {
		out = append(out, l.schemaProblem(leaf))
	}
	slices.SortStableFunc(out, comparePlace)
	return out, nil
}

// jsonValue is the document at body as the JSON value the validator takes
// (objects as map[string]any, numbers as json.Number). A panic of the
// YAML library becomes an error, as in decode.
func jsonValue(body ast.Node) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML decoder failed on this input: %v", r)
		}
	}()
	var raw any
	if err := yaml.NodeToValue(body, &raw, yaml.UseOrderedMap()); err != nil {
		return nil, err
	}
	js, err := yaml.MarshalWithOptions(raw, yaml.JSON())
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(js))
}

// validationLeaves flattens a validation error tree into its leaves, the
// concrete violations.
func validationLeaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var leaves []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		leaves = append(leaves, validationLeaves(c)...)
	}
	return leaves
}

// schemaProblem describes one violation in the config's terms, at the key
// it is about when it is about a key.
func (l *loader) schemaProblem(leaf *jsonschema.ValidationError) *ConfigError {
	path := l.pointerPath(leaf.InstanceLocation)
	field := fieldName(path)
	switch k := leaf.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		return l.problemAt(l.keyPos(path, k.Properties[0]), "schema: unknown key %q%s", k.Properties[0], inField(field))
	case *kind.FalseSchema:
		at := l.keyPos(path[:len(path)-1], leaf.InstanceLocation[len(path)-1])
		if why := schemaReason(leaf.SchemaURL); why != "" {
			return l.problemAt(at, "schema: %s is not allowed here: %s", field, why)
		}
		return l.problemAt(at, "schema: %s is not allowed here", field)
	case *kind.Required:
		return l.problemAt(l.pos(path...), "schema: missing key %q%s", k.Missing[0], inField(field))
	case *kind.Type:
		return l.problemAt(l.pos(path...), "schema: %s: expected %s, got %s", field, strings.Join(k.Want, " or "), k.Got)
	case *kind.Pattern:
		if strings.HasSuffix(leaf.SchemaURL, "/$defs/duration") {
			return l.problemAt(l.pos(path...), "schema: %s %q is not a positive duration such as \"30s\"", field, k.Got)
		}
	}
	return l.problemAt(l.pos(path...), "schema: %s: %s", field, leaf.BasicOutput().Error.String())
}

// problemAt is a config problem at p, inside the tool that holds p.
func (l *loader) problemAt(p pos, format string, args ...any) *ConfigError {
	return &ConfigError{File: l.file, Line: p.line, Column: p.col,
		Tool: l.toolAt(&token.Position{Line: p.line, Column: p.col}), Msg: fmt.Sprintf(format, args...)}
}

// inField is " in field", or "" at the top level.
func inField(field string) string {
	if field == "" {
		return ""
	}
	return " in " + field
}

// pointerPath turns the tokens of a JSON pointer into a path for pos:
// sequence indexes become ints.
func (l *loader) pointerPath(tokens []string) []any {
	path := make([]any, 0, len(tokens))
	n := l.body
	for _, t := range tokens {
		var p any = t
		if _, ok := unwrap(n).(*ast.SequenceNode); ok {
			if i, err := strconv.Atoi(t); err == nil {
				p = i
			}
		}
		path = append(path, p)
		if n != nil {
			n = l.step(n, p)
		}
	}
	return path
}

// fieldName writes a path as the config's docs do: tools[0].http.url.
func fieldName(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// keyPos is the position of key in the mapping at path (of the mapping
// when the key is not found).
func (l *loader) keyPos(path []any, key string) pos {
	if mv := mappingValue(l.nodeAt(path...), key); mv != nil {
		if p := posOf(mv.Key); p.line > 0 {
			return p
		}
	}
	return l.pos(path...)
}

// comparePlace orders problems by line, then column.
func comparePlace(a, b *ConfigError) int {
	if a.Line != b.Line {
		return a.Line - b.Line
	}
	return a.Column - b.Column
}
