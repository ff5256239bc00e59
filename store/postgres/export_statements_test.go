package postgres

import "fmt"

// StatementCase is one variant of a statement built from parts, with the
// arguments its parameter struct gives for a sample of its rows.
type StatementCase struct {
	Name string
	SQL  string
	Args []any
}

// StatementCases returns a case for every variant of every statement
// built from parts (see statementCases).
func StatementCases() ([]StatementCase, error) {
	cases, err := statementCases()
	if err != nil {
		return nil, err
	}
	out := make([]StatementCase, len(cases))
	for i, c := range cases {
		out[i] = StatementCase{Name: fmt.Sprintf("%s %d", c.family, c.variant), SQL: c.stmt.sql, Args: c.args}
	}
	return out, nil
}
