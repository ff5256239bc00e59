package postgres

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

var update = flag.Bool("update", false, "rewrite testdata/statements.sql")

func TestCompile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src, sql string
		first    []string
		params   []string
	}{
		{`SELECT @b, @a::int WHERE x = @b AND y = @a_b`, `SELECT $1, $2::int WHERE x = $1 AND y = $3`, nil, []string{"b", "a", "a_b"}},
		{`SELECT @b, @a::int WHERE x = @b AND y = @a_b`, `SELECT $3, $1::int WHERE x = $3 AND y = $4`, []string{"a", "c"}, []string{"a", "c", "b", "a_b"}},
	}
	for _, tt := range tests {
		st := compile(tt.src, tt.first...)
		if st.sql != tt.sql {
			t.Errorf("compile(%q, %q): sql = %q, want %q", tt.src, tt.first, st.sql, tt.sql)
		}
		if !slices.Equal(st.params, tt.params) {
			t.Errorf("compile(%q, %q): params = %v, want %v", tt.src, tt.first, st.params, tt.params)
		}
	}
}

func TestVariants(t *testing.T) {
	t.Parallel()
	got := variants("A @x", " Z", []string{" P @p", " Q @x @q"})
	want := []statement{
		{"A $1 Z", []string{"x"}},
		{"A $1 P $2 Z", []string{"x", "p"}},
		{"A $1 Q $1 $2 Z", []string{"x", "q"}},
		{"A $1 P $2 Q $1 $3 Z", []string{"x", "p", "q"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d variants, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].sql != want[i].sql || !slices.Equal(got[i].params, want[i].params) {
			t.Errorf("variant %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// family is a statement's variants, with the names of the parts that
// their index's bits stand for.
type family struct {
	name  string
	stmts []statement
	parts []string
}

var families = []family{
	{"record", recordSQL, []string{"outputs", "webhooks", "on conflict"}},
	{"commit", commitSQL, []string{"lines", "results", "outputs", "parks", "webhook"}},
	{"resolve", resolveSQL, []string{"results", "outputs", "webhook"}},
	{"resolve many", resolveManySQL, []string{"results", "outputs", "webhook"}},
	{"late", recordLateSQL, []string{"outputs"}},
	{"record one", recordOneSQL, []string{"outputs", "webhook"}},
	{"approve", approveSQL, []string{"lines"}},
}

// statementCase is one variant of a family with the arguments its
// parameter struct gives for a sample that has rows for exactly its parts.
type statementCase struct {
	family  string
	variant int
	stmt    statement
	args    []any
	// got is the variant the parameter struct picked.
	got int
}

// statementCases returns a case for every variant of every family (but
// resolve's outputs without results: outputs come with an item, hence a
// result).
func statementCases() ([]statementCase, error) {
	var cases []statementCase
	add := func(f string, stmts []statement, variant, got int, args []any) {
		cases = append(cases, statementCase{family: f, variant: variant, stmt: stmts[variant], args: args, got: got})
	}
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
		var p commitParams
		if err := p.set(c); err != nil {
			return nil, err
		}
		add("commit", commitSQL, parts, p.variant(), p.args())
	}
	fullResolve := sampleResolve()
	for parts := range resolveSQL {
		b := fullResolve
		b.Items = slices.Clone(fullResolve.Items)
		if parts&resolveResults == 0 {
			b.Items = nil // an item always carries its result
		} else if parts&resolveOutputs == 0 {
			b.Items[0].Outputs = nil
		}
		if parts&resolveOutputs != 0 && parts&resolveResults == 0 {
			continue
		}
		if parts&resolveHook == 0 {
			b.SettleWebhook = nil
		}
		p, err := resolveArgs(b)
		if err != nil {
			return nil, err
		}
		add("resolve", resolveSQL, parts, p.variant(), p.args())
		// The set-based statement for two such calls: the second of
		// another session, without optional rows.
		other := turn.ResolveBatch{Key: turn.TurnKey{SessionID: "s2", TurnID: "t2"}, SettleStatus: b.SettleStatus, Now: b.Now}
		q, err := resolveArgs(other)
		if err != nil {
			return nil, err
		}
		mp := manyArgs([]*resolveCall{{b: &b, p: p}, {b: &other, p: q}})
		add("resolve many", resolveManySQL, parts, mp.variant(), mp.args())
	}
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	l := turn.Late{Max: 8, Line: turn.Line{Kind: turn.LineCompletionLate, Data: []byte(`{}`)}}
	for variant := range recordLateSQL {
		if variant == 1 {
			l.Outputs = []turn.Output{{ID: "o", Data: []byte("x")}}
		}
		p, err := lateArgs(k, l)
		if err != nil {
			return nil, err
		}
		add("late", recordLateSQL, variant, p.variant(), p.args())
	}
	for variant := range recordOneSQL {
		r := storetest.WholeTurn("s", "t", 2)
		if variant&recordOneOutputs != 0 {
			r.Outputs = []turn.Output{{ID: "o", CallID: "t-c0", Data: []byte("x"), CreatedAt: time.Now()}}
		}
		if variant&recordOneWebhook != 0 {
			r.Webhook = sampleWebhook(time.Now())
		}
		var e encodedRecord
		if err := e.encode(&r); err != nil {
			return nil, err
		}
		var p recordOneParams
		if err := p.set(&e); err != nil {
			return nil, err
		}
		add("record one", recordOneSQL, variant, p.variant(), p.args())
	}
	for variant := range approveSQL {
		p := approveParams{a: turn.Approve{Key: k, Decision: []byte(`{"decision":"approved"}`), Owner: "o", LeaseUntil: time.Now()}}
		if variant&partLines != 0 {
			if err := p.lines.set(k, []turn.Line{{Kind: turn.LineCallDecided, Data: []byte(`{}`)}}); err != nil {
				return nil, err
			}
		}
		add("approve", approveSQL, variant, p.variant(), p.args())
	}
	for variant := range recordSQL {
		r := storetest.WholeTurn("s", "t", 2)
		if variant&1 != 0 {
			r.Outputs = []turn.Output{{ID: "o", CallID: "t-c0", Data: []byte("x"), CreatedAt: time.Now()}}
		}
		if variant&2 != 0 {
			r.Webhook = sampleWebhook(time.Now())
		}
		c := &recordCall{}
		if err := c.rec.encode(&r); err != nil {
			return nil, err
		}
		p := makeRecordParams([]*recordCall{c})
		p.add(&c.rec)
		add("record", recordSQL, variant, p.variant()|variant&recordSafe, p.args())
	}
	return cases, nil
}

// TestStatementArgs: every variant's parameter struct picks the variant
// for its rows and gives one argument per parameter.
// (TestStatementArgTypes, against a server, checks their types.)
func TestStatementArgs(t *testing.T) {
	t.Parallel()
	cases, err := statementCases()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		n += len(f.stmts)
	}
	if want := n - 4; len(cases) != want { // the two resolving statements' two variants of outputs without results
		t.Errorf("%d cases for %d variants", len(cases), want)
	}
	for _, c := range cases {
		if c.got != c.variant {
			t.Errorf("%s: parameters for variant %b picked variant %b", c.family, c.variant, c.got)
		}
		if len(c.args) != len(c.stmt.params) {
			t.Errorf("%s variant %b: %d arguments for %d parameters %v", c.family, c.variant, len(c.args), len(c.stmt.params), c.stmt.params)
		}
		if strings.Contains(c.stmt.sql, "@") {
			t.Errorf("%s variant %b: statement still has a named parameter", c.family, c.variant)
		}
	}
}

// TestStatementsFile holds testdata/statements.sql to the statements as
// sent (go test -run TestStatementsFile -update rewrites it).
func TestStatementsFile(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("-- Every statement of store/postgres as sent to the server: each variant of\n")
	b.WriteString("-- those built from parts, then those sent as written, each with how it is\n")
	b.WriteString("-- routed on Citus (TestStatementsRouted checks it; see routing_test.go).\n")
	b.WriteString("-- Generated by TestStatementsFile: do not edit.\n")
	for _, f := range families {
		for i, st := range f.stmts {
			var with []string
			for j, p := range f.parts {
				if i&(1<<j) != 0 {
					with = append(with, p)
				}
			}
			if with == nil {
				with = []string{"no optional part"}
			}
			fmt.Fprintf(&b, "\n-- %s %d: %s\n", f.name, i, strings.Join(with, ", "))
			line := "--"
			for j, p := range st.params {
				param := fmt.Sprintf(" $%d %s", j+1, p)
				if len(line)+len(param) > 80 {
					b.WriteString(line + "\n")
					line = "--"
				}
				line += param
			}
			fmt.Fprintf(&b, "%s\n%s\n%s;\n", line, routeComment(familyRoute[f.name]), st.sql)
		}
	}
	for _, st := range singles {
		fmt.Fprintf(&b, "\n-- %s\n%s\n%s;\n", st.name, routeComment(st), st.sql)
	}
	path := filepath.Join("testdata", "statements.sql")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != b.String() {
		t.Errorf("%s is not the statements as built (go test -run TestStatementsFile -update rewrites it)", path)
	}
}
