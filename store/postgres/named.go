package postgres

import (
	"fmt"
	"regexp"
	"strconv"
)

// positional is a statement written with @name parameters, rewritten to
// $1, $2, … with the names in parameter order.
type positional struct {
	sql   string
	names []string
}

// paramName matches a parameter; turnd's SQL has no '@' anywhere else (no
// string literal or operator uses one).
var paramName = regexp.MustCompile(`@[a-z_]+`)

func toPositional(named string) positional {
	var p positional
	index := make(map[string]int)
	p.sql = paramName.ReplaceAllStringFunc(named, func(m string) string {
		name := m[1:]
		i, ok := index[name]
		if !ok {
			p.names = append(p.names, name)
			i = len(p.names)
			index[name] = i
		}
		return "$" + strconv.Itoa(i)
	})
	return p
}

// args orders values by the statement's parameters. A missing value is a
// bug in the caller: it panics rather than sending NULL.
func (p positional) args(values map[string]any) []any {
	out := make([]any, len(p.names))
	for i, name := range p.names {
		v, ok := values[name]
		if !ok {
			panic(fmt.Sprintf("postgres: no value for parameter @%s", name))
		}
		out[i] = v
	}
	return out
}
