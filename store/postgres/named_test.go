package postgres

import (
	"slices"
	"strings"
	"testing"
)

func TestToPositional(t *testing.T) {
	t.Parallel()
	p := toPositional(`SELECT @b, @a::int WHERE x = @b AND y = @a_b`)
	if want := `SELECT $1, $2::int WHERE x = $1 AND y = $3`; p.sql != want {
		t.Errorf("sql = %q, want %q", p.sql, want)
	}
	if want := []string{"b", "a", "a_b"}; !slices.Equal(p.names, want) {
		t.Errorf("names = %v, want %v", p.names, want)
	}
	got := p.args(map[string]any{"a": 1, "b": 2, "a_b": 3})
	if !slices.Equal(got, []any{2, 1, 3}) {
		t.Errorf("args = %v", got)
	}
}

// Every commit statement's parameters are bound by commitArgs, whatever the
// commit carries.
func TestCommitArgsCoverStatements(t *testing.T) {
	t.Parallel()
	full := sampleCommit()
	for parts := range commitSQL {
		c := full
		if parts&partLines == 0 {
			c.Lines = nil
		}
		if parts&partResults == 0 {
			c.Results = nil
		}
		if parts&partOutputs == 0 {
			c.Outputs = nil
		}
		got, args, err := commitArgs(c)
		if err != nil {
			t.Fatal(err)
		}
		if got != parts {
			t.Errorf("commitArgs parts = %b, want %b", got, parts)
		}
		stmt := commitSQL[parts]
		if len(args) != len(stmt.names) {
			t.Errorf("parts %b: %d arguments for %d parameters", parts, len(args), len(stmt.names))
		}
		stmt.args(args) // panics on a missing one
		if strings.Contains(stmt.sql, "@") {
			t.Errorf("parts %b: statement still has a named parameter", parts)
		}
	}
}
