package postgres

import (
	"regexp"
	"strconv"
)

// statement is a statement as sent to the server: its SQL with positional
// parameters, and the names its source gave them, in parameter order (for
// the tests and testdata/statements.sql; the values come from a parameter
// struct's args, in the same order).
type statement struct {
	sql    string
	params []string
}

// paramName matches a parameter; turnd's SQL has no '@' anywhere else (no
// string literal or operator uses one).
var paramName = regexp.MustCompile(`@[a-z_]+`)

// compile rewrites the @name parameters of src to $1, $2, …: the names in
// first are $1, $2, … in that order, the others follow in order of first
// appearance, and a name used twice is one parameter.
func compile(src string, first ...string) statement {
	var st statement
	index := make(map[string]int)
	number := func(name string) int {
		i, ok := index[name]
		if !ok {
			st.params = append(st.params, name)
			i = len(st.params)
			index[name] = i
		}
		return i
	}
	for _, name := range first {
		number(name)
	}
	st.sql = paramName.ReplaceAllStringFunc(src, func(m string) string { return "$" + strconv.Itoa(number(m[1:])) })
	return st
}

// variants compiles head + tail with every combination of parts between
// them: variant i includes parts[j] when bit j of i is set. first is as in
// compile.
func variants(head, tail string, parts []string, first ...string) []statement {
	stmts := make([]statement, 1<<len(parts))
	for i := range stmts {
		sql := head
		for j, p := range parts {
			if i&(1<<j) != 0 {
				sql += p
			}
		}
		stmts[i] = compile(sql+tail, first...)
	}
	return stmts
}
