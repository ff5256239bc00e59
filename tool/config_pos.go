package tool

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// yamlError turns an error of the YAML library into a ConfigError at the
// line it gives, naming the tool when the line is inside one.
func (l *loader) yamlError(err error) error {
	ce := &ConfigError{File: l.file, Msg: err.Error(), Err: err}
	var ye yaml.Error
	if errors.As(err, &ye) {
		ce.Msg = ye.GetMessage()
		tk := ye.GetToken()
		if tk != nil && tk.Position != nil {
			ce.Line, ce.Column = tk.Position.Line, tk.Position.Column
			ce.Tool = l.toolAt(tk.Position)
		}
		// The library's text names Go types; say it in the config's terms.
		// The value itself is left out: it might be a secret.
		var te *yaml.TypeError
		if errors.As(err, &te) && te.DstType != nil {
			ce.Msg = "expected " + yamlKind(te.DstType)
			if te.SrcType != nil {
				ce.Msg += ", got " + yamlKind(te.SrcType)
			}
			if key := l.keyOf(tk); key != "" {
				ce.Msg = key + ": " + ce.Msg
			}
		}
	}
	return ce
}

// yamlKind names a Go type as the YAML value it decodes from.
func yamlKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a value"
}

// keyOf finds the mapping key whose value is at tk ("" if none).
func (l *loader) keyOf(tk *token.Token) string {
	if tk == nil || l.body == nil {
		return ""
	}
	f := &keyFinder{tk: tk}
	ast.Walk(f, l.body)
	return f.key
}

type keyFinder struct {
	tk  *token.Token
	key string
}

func (f *keyFinder) Visit(n ast.Node) ast.Visitor {
	if f.key != "" {
		return nil
	}
	if mv, ok := n.(*ast.MappingValueNode); ok && mv.Value != nil {
		if p := start(mv.Value); p != nil && f.tk.Position != nil && *p == *f.tk.Position {
			f.key = mv.Key.GetToken().Value
			return nil
		}
	}
	return f
}

// toolAt names the tools[] entry that holds pos ("" if none).
func (l *loader) toolAt(pos *token.Position) string {
	seq, ok := unwrap(l.child(l.body, "tools")).(*ast.SequenceNode)
	if !ok {
		return ""
	}
	idx := -1
	for i, item := range seq.Values {
		if p := start(item); p != nil && !before(pos, p) {
			idx = i
		}
	}
	if idx < 0 {
		return ""
	}
	// A top-level key between the entry's start and pos ends the entry.
	if m, ok := unwrap(l.body).(*ast.MappingNode); ok {
		for _, mv := range m.Values {
			k := start(mv.Key)
			if mv.Key.GetToken().Value != "tools" && before(start(seq.Values[idx]), k) && !before(pos, k) {
				return ""
			}
		}
	}
	if n, ok := unwrap(l.child(seq.Values[idx], "name")).(*ast.StringNode); ok && namePattern.MatchString(n.Value) {
		return n.Value
	}
	return fmt.Sprintf("tools[%d]", idx)
}

// before reports whether a comes strictly before b; nil is never before.
func before(a, b *token.Position) bool {
	if a == nil || b == nil {
		return false
	}
	return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
}

// pos is a place in the config file: 1-based line and column, zero when
// unknown.
type pos struct{ line, col int }

// pos finds the position of the node at path (keys and sequence indexes)
// from the document root, or of its nearest ancestor that exists.
func (l *loader) pos(path ...any) pos {
	n, best := l.body, pos{}
	for _, p := range path {
		if n == nil {
			break
		}
		if q := posOf(n); q.line > 0 {
			best = q
		}
		n = l.step(n, p)
	}
	if n != nil {
		if q := posOf(n); q.line > 0 {
			best = q
		}
	}
	return best
}

// nodeAt returns the node at path (keys and sequence indexes) from the
// document root, or nil.
func (l *loader) nodeAt(path ...any) ast.Node {
	n := l.body
	for _, p := range path {
		if n == nil {
			return nil
		}
		n = l.step(n, p)
	}
	return n
}

// step returns n's child at p: the value under a key (string) or the
// element at a sequence index (int); nil when there is none.
func (l *loader) step(n ast.Node, p any) ast.Node {
	switch k := p.(type) {
	case string:
		return l.child(n, k)
	case int:
		if seq, ok := unwrap(n).(*ast.SequenceNode); ok && k >= 0 && k < len(seq.Values) {
			return seq.Values[k]
		}
	}
	return nil
}

// child returns the value under key in a mapping node.
func (l *loader) child(n ast.Node, key string) ast.Node {
	if mv := mappingValue(n, key); mv != nil {
		return mv.Value
	}
	return nil
}

// mappingValue returns the key-value pair of key in a mapping node, or nil.
func mappingValue(n ast.Node, key string) *ast.MappingValueNode {
	var values []*ast.MappingValueNode
	switch m := unwrap(n).(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	}
	for _, mv := range values {
		if tk := mv.Key.GetToken(); tk != nil && tk.Value == key {
			return mv
		}
	}
	return nil
}

// unwrap looks through an anchor to its value.
func unwrap(n ast.Node) ast.Node {
	if a, ok := n.(*ast.AnchorNode); ok {
		return a.Value
	}
	return n
}

// start is the position of n's first token: its first key for a block
// mapping; nil when n has none.
func start(n ast.Node) *token.Position {
	if n == nil {
		return nil
	}
	if m, ok := unwrap(n).(*ast.MappingNode); ok && len(m.Values) > 0 && !m.IsFlowStyle {
		n = m.Values[0].Key
	}
	tk := n.GetToken()
	if tk == nil {
		return nil
	}
	return tk.Position
}

// posOf is the position of n (see start).
func posOf(n ast.Node) pos {
	if p := start(n); p != nil {
		return pos{p.Line, p.Column}
	}
	return pos{}
}
