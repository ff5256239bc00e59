package postgres

import (
	"slices"
	"strings"
	"testing"

	"github.com/turnd/turnd/turn"
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
		if parts&partParks == 0 {
			c.Parks = nil
		}
		if parts&partWebhook == 0 {
			c.Webhook = nil
		}
		got, args, err := commitArgs(c)
		if err != nil {
			t.Fatal(err)
		}
		if got != parts {
			t.Errorf("commitArgs parts = %b, want %b", got, parts)
		}
		checkBound(t, "commit", parts, commitSQL[parts], args)
	}
}

// Likewise for Resolve's write and settle statements and RecordLate's.
func TestResolveArgsCoverStatements(t *testing.T) {
	t.Parallel()
	full := sampleResolve()
	for parts := range resolveSQL {
		b := full
		b.Items = slices.Clone(full.Items)
		if parts&partLines == 0 {
			b.Lines = nil
		}
		if parts&partResults == 0 {
			b.Items = nil // an item always carries its result
		} else if parts&partOutputs == 0 {
			b.Items[0].Outputs = nil
		}
		if parts&partOutputs != 0 && parts&partResults == 0 {
			continue // outputs come with an item, hence a result
		}
		got, args, err := resolveArgs(b)
		if err != nil {
			t.Fatal(err)
		}
		if got != parts {
			t.Errorf("resolveArgs parts = %b, want %b", got, parts)
		}
		checkBound(t, "resolve", parts, resolveSQL[parts], args)
	}
	for parts := range settleSQL {
		b := full
		if parts&settleLines == 0 {
			b.SettleLines = nil
		}
		if parts&settleWebhook == 0 {
			b.SettleWebhook = nil
		}
		got, args, err := settleArgs(b)
		if err != nil {
			t.Fatal(err)
		}
		if got != parts {
			t.Errorf("settleArgs parts = %b, want %b", got, parts)
		}
		checkBound(t, "settle", parts, settleSQL[parts], args)
	}
}

func checkBound(t *testing.T, what string, parts int, stmt positional, args map[string]any) {
	t.Helper()
	if len(args) != len(stmt.names) {
		t.Errorf("%s parts %b: %d arguments for %d parameters", what, parts, len(args), len(stmt.names))
	}
	stmt.args(args) // panics on a missing one
	if strings.Contains(stmt.sql, "@") {
		t.Errorf("%s parts %b: statement still has a named parameter", what, parts)
	}
}

// RecordLate's statement binds every argument lateArgs encodes, with and
// without an output.
func TestLateArgsCoverStatements(t *testing.T) {
	t.Parallel()
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	l := turn.Late{Max: 8, Line: turn.Line{Kind: turn.LineCompletionLate, Data: []byte(`{}`)}}
	for variant := range recordLateSQL {
		if variant == 1 {
			l.Outputs = []turn.Output{{ID: "o", Data: []byte("x")}}
		}
		got, args, err := lateArgs(k, l)
		if err != nil {
			t.Fatal(err)
		}
		if got != variant {
			t.Errorf("lateArgs variant = %d, want %d", got, variant)
		}
		checkBound(t, "record late", variant, recordLateSQL[variant], args)
	}
}
