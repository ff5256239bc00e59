package postgres

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every statement of the store is routed to one session — each reference
// to a table distributed by session names the session, so that on Citus
// (docs/citus.md) it runs on the one shard group holding it — or fans out
// on purpose. TestStatementsRouted reads testdata/statements.sql, where
// each statement says which it is, and checks the claim against the SQL.

// distribution names the column each distributed table is sharded by;
// legacy_keys, legacy_outputs and settings are reference tables (on every
// node), and goose's table is the coordinator's own.
var distribution = map[string]string{
	"sessions":       "id",
	"turns":          "session_id",
	"results":        "session_id",
	"ledger_batches": "session_id",
	"outputs":        "session_id",
	"completions":    "session_id",
	"webhooks":       "session_id",
}

// single is a statement sent as it is written (not built from parts).
type single struct {
	name, sql string
	// route is the number of the parameter holding the session (1 for $1),
	// or 0 for a statement that fans out or is local, why says why.
	route int
	why   string
	// local: the statement touches no distributed table (reference tables
	// and the coordinator's own only).
	local bool
}

// Reasons for the statements that fan out.
const (
	whyListing  = "listing across sessions (GET /v1/sessions, GET /v1/pending): one query per shard, merged by the coordinator"
	whyRecovery = "recovery claim across sessions: finds expired leases wherever they are"
	whyDue      = "sweeper: finds due completions across sessions"
	whyOutbox   = "webhook delivery loop: claims due webhooks across sessions"
	whyGauge    = "the pending gauge: one count over every shard"
	whyExpiry   = "output expiry: deletes expired outputs on every shard"
	whyReplica  = "one replica's running turns, of many sessions, in one statement every third of the lease TTL (RenewLeases) or per notification batch (CancelRequested)"
	whyGroup    = "group statement: one statement for up to 64 turns of different sessions (group commit); plain PostgreSQL only: sharded (TURND_CITUS), one statement per turn, routed (record one, sqlLookupTurn)"
	whyLocal    = "runs on the coordinator's own tables"
	// whyResolveMany: the set-based statements of Resolve's group commit.
	whyResolveMany = "group statement: one statement for up to 32 resolutions of different sessions (Resolve's group commit); plain PostgreSQL only: sharded (TURND_CITUS), sqlLockResolve and the resolving statement per resolution, routed"
)

// singles lists every statement constant of the package (TestSinglesListed
// holds the list to the source).
var singles = []single{
	{"sqlCreateSession", sqlCreateSession, 1, "", false},
	{"sqlGetSession", sqlGetSession, 1, "", false},
	{"sqlReceiveTurn", sqlReceiveTurn, 1, "", false},
	{"sqlGetTurn", sqlGetTurn, 1, "", false},
	{"sqlGetResults", sqlGetResults, 1, "", false},
	{"sqlAnswered", sqlAnswered, 1, "", false},
	{"sqlLedger", sqlLedger, 1, "", false},
	{"sqlTurnLedger", sqlTurnLedger, 1, "", false},
	{"sqlRequestCancel", sqlRequestCancel, 1, "", false},
	{"sqlIssueCompletion", sqlIssueCompletion, 2, "", false},
	{"sqlGetCompletion", sqlGetCompletion, 1, "", false},
	{"sqlGetDelivery", sqlGetDelivery, 1, "", false},
	{"sqlDeliverEarly", sqlDeliverEarly, 1, "", false},
	{"sqlHeartbeat", sqlHeartbeat, 1, "", false},
	{"sqlTurnCompletions", sqlTurnCompletions, 1, "", false},
	{"sqlLockResolve", sqlLockResolve, 2, "", false},
	{"sqlLockMany", sqlLockMany, 0, whyResolveMany, false},
	{"sqlLockLate", sqlLockLate, 1, "", false},
	{"sqlBeginResolve", sqlBeginResolve, 0, "transaction control: Resolve's pipeline, whose statements are routed by its session", true},
	{"sqlCommit", sqlCommit, 0, "transaction control: Resolve's pipeline, whose statements are routed by its session", true},
	{"sqlDropLate", sqlDropLate, 1, "", false},
	{"sqlGetOutput", sqlGetOutput, 1, "", false},
	{"sqlMarkWebhook", sqlMarkWebhook, 1, "", false},
	{"sqlTurnWebhooks", sqlTurnWebhooks, 1, "", false},
	{"ListTurnsSQL", ListTurnsSQL, 1, "", false},
	{"sqlClaimTurn", sqlClaimTurn, 1, "", false},
	{"sqlRenewLease", sqlRenewLease, 1, "", false},
	{"sqlClaimWebhook", sqlClaimWebhook, 1, "", false},
	{"sqlClaimCandidates", sqlClaimCandidates, 0, whyRecovery + " (Options.Sharded: reads only; each claim is then routed)", false},
	{"sqlWebhookCandidates", sqlWebhookCandidates, 0, whyOutbox + " (Options.Sharded: reads only; each claim is then routed)", false},
	{"sqlLegacyKey", sqlLegacyKey, 0, "reads legacy_keys, a reference table: local on every node", true},
	{"sqlLegacyOutput", sqlLegacyOutput, 0, "reads legacy_outputs, a reference table: local on every node", true},
	{"sqlGetSetting", sqlGetSetting, 0, "reads settings, a reference table: local on every node", true},
	{"sqlInsertSetting", sqlInsertSetting, 0, "writes settings, a reference table, once per database (the completion secret)", true},
	{"ListSessionsSQL", ListSessionsSQL, 0, whyListing, false},
	{"ListParkedSQL", ListParkedSQL, 0, whyListing, false},
	{"ListApprovalsSQL", ListApprovalsSQL, 0, whyListing, false},
	{"sqlLockApproval", sqlLockApproval, 1, "", false},
	{"sqlClaimApproved", sqlClaimApproved, 1, "", false},
	{"sqlClaimTurns", sqlClaimTurns, 0, whyRecovery + "; plain PostgreSQL only: sharded, sqlClaimCandidates then sqlClaimTurn", false},
	{"sqlDueCompletions", sqlDueCompletions, 0, whyDue, false},
	{"sqlClaimWebhooks", sqlClaimWebhooks, 0, whyOutbox + "; plain PostgreSQL only: sharded, sqlWebhookCandidates then sqlClaimWebhook", false},
	{"sqlPendingCount", sqlPendingCount, 0, whyGauge, false},
	{"sqlDeleteExpiredOutputs", sqlDeleteExpiredOutputs, 0, whyExpiry, false},
	{"sqlRenewLeases", sqlRenewLeases, 0, whyReplica + "; plain PostgreSQL only: sharded, sqlRenewLease per turn", false},
	{"sqlCancelRequested", sqlCancelRequested, 0, whyReplica, false},
	{"sqlUnsettled", sqlUnsettled, 0, "the turns one replica's waiters wait on, of many sessions, in one statement a second (WaitSettled's poll)", false},
	{"sqlLookupTurn", sqlLookupTurn, 1, "", false},
	{"sqlLookupTurns", sqlLookupTurns, 0, whyGroup, false},
	{"sqlPublish", sqlPublish, 0, "pg_notify on the node it is sent to (see docs/citus.md)", true},
	{"sqlLockScope", sqlLockScope, 0, whyLocal, true},
	{"sqlCitusInstalled", sqlCitusInstalled, 0, whyLocal, true},
	{"sqlSchemaVersion", sqlSchemaVersion, 0, whyLocal, true},
	{"sqlLegacySchemaVersion", sqlLegacySchemaVersion, 0, whyLocal, true},
}

// familyRoute is how each family's variants are routed: the write
// statements by their @session ($1); the recording statement fans out.
var familyRoute = map[string]single{
	"record":  {route: 0, why: whyGroup},
	"commit":  {route: 1},
	"resolve": {route: 1},
	// Resolve's group commit of several sessions.
	"resolve many": {route: 0, why: whyResolveMany},
	"late":         {route: 1},
	// Options.Sharded's RecordTurn, one turn of one session.
	"record one": {route: 1},
	"approve":    {route: 1},
}

// routeComment is the line of statements.sql that states a statement's
// routing.
func routeComment(s single) string {
	switch {
	case s.route > 0:
		return fmt.Sprintf("-- routed: session $%d", s.route)
	case s.local:
		return "-- local: " + s.why
	}
	return "-- fans out: " + s.why
}

// TestSinglesListed: every statement constant in the package's source
// (sqlX, XSQL) is in singles, so that statements.sql has them all.
func TestSinglesListed(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "sql") || strings.HasSuffix(n.Name, "SQL") {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	listed := map[string]bool{}
	for _, s := range singles {
		listed[s.name] = true
	}
	for _, n := range names {
		if !listed[n] {
			t.Errorf("statement %s is not in singles (routing_test.go): say how it is routed", n)
		}
	}
	if len(names) != len(singles) {
		t.Errorf("%d statement constants in the source, %d in singles", len(names), len(singles))
	}
}

// fileStatement is a statement of statements.sql with its routing claim.
type fileStatement struct {
	name  string
	sql   string
	route int    // 0: fans out or local
	why   string // for a statement that fans out or is local
	local bool
}

// readStatements parses statements.sql: blocks separated by a blank line,
// the first the file's header; each other block is its comment lines (its
// name first, a routing line among them) and its SQL, ending with ";".
func readStatements(t *testing.T) []fileStatement {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "statements.sql"))
	if err != nil {
		t.Fatal(err)
	}
	routed := regexp.MustCompile(`^-- routed: session \$(\d+)$`)
	blocks := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	var out []fileStatement
	for _, block := range blocks[1:] {
		lines := strings.Split(block, "\n")
		st := fileStatement{name: strings.TrimPrefix(lines[0], "-- "), route: -1}
		n := 0
		for n < len(lines) && strings.HasPrefix(lines[n], "--") {
			if m := routed.FindStringSubmatch(lines[n]); m != nil {
				st.route, _ = strconv.Atoi(m[1])
			} else if why, ok := strings.CutPrefix(lines[n], "-- fans out: "); ok {
				st.route, st.why = 0, why
			} else if why, ok := strings.CutPrefix(lines[n], "-- local: "); ok {
				st.route, st.why, st.local = 0, why, true
			}
			n++
		}
		sql := strings.Join(lines[n:], "\n")
		if n == 0 || !strings.HasSuffix(sql, ";") {
			t.Fatalf("statements.sql: block %q is not comments and a statement", lines[0])
		}
		st.sql = strings.TrimSuffix(sql, ";")
		out = append(out, st)
	}
	return out
}

// TestStatementsRouted holds every statement of statements.sql to its
// routing line: a routed statement's every reference to a distributed
// table names the session parameter, directly or through a column of a
// reference that does; a statement that fans out gives a reason and
// indeed is not routed (so that the list of fan-outs stays true).
func TestStatementsRouted(t *testing.T) {
	t.Parallel()
	stmts := readStatements(t)
	if len(stmts) < 60 {
		t.Fatalf("read %d statements from statements.sql: is the parser still right?", len(stmts))
	}
	for _, st := range stmts {
		switch {
		case st.route < 0:
			t.Errorf("%s: no routing line (-- routed: session $N, -- fans out: why, or -- local: why)", st.name)
		case st.local:
			if refs := tableRefs(st.sql); st.why == "" || len(refs) > 0 {
				t.Errorf("%s: local (%q), yet references %d distributed tables", st.name, st.why, len(refs))
			}
		case st.route == 0:
			if st.why == "" {
				t.Errorf("%s fans out without a reason", st.name)
			}
			if bad := unrouted(st.sql, 1); len(bad) == 0 {
				t.Errorf("%s is routed by $1, yet listed as fanning out (%s)", st.name, st.why)
			}
		default:
			if bad := unrouted(st.sql, st.route); len(bad) > 0 {
				t.Errorf("%s: not routed by $%d: %s", st.name, st.route, strings.Join(bad, "; "))
			}
		}
	}
}

// TestRoutingCheck: the check itself, on statements that are and are not
// routed.
func TestRoutingCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, sql string
		routed    bool
	}{
		{"by key", `SELECT * FROM turns WHERE session_id = $1 AND id = $2`, true},
		{"reversed equality", `SELECT * FROM turns t WHERE $1 = t.session_id`, true},
		{"other parameter", `SELECT * FROM turns WHERE session_id = $2`, false},
		{"no filter", `SELECT * FROM completions WHERE key_hash = $1`, false},
		{"filter in a subquery only", `SELECT * FROM completions WHERE key_hash IN (SELECT key_hash FROM completions WHERE session_id = $1)`, false},
		{"array of sessions", `SELECT * FROM turns WHERE session_id = ANY($1)`, false},
		{"sessions by id", `UPDATE sessions SET last_seq = 1 WHERE id = $1`, true},
		{"sessions by another column", `UPDATE sessions SET last_seq = 1 WHERE session_id = $1`, false},
		{"through a routed alias", `SELECT * FROM sessions s JOIN ledger_batches b ON b.session_id = s.id WHERE s.id = $1`, true},
		{"through an unrouted alias", `SELECT * FROM sessions s JOIN ledger_batches b ON b.session_id = s.id WHERE s.created_at = $1`, false},
		{"insert values", `INSERT INTO outputs (id, session_id) VALUES ($2, $1)`, true},
		{"insert values, wrong column", `INSERT INTO outputs (id, session_id) VALUES ($1, $2)`, false},
		{"insert select", `INSERT INTO results (session_id, turn_id) SELECT $1, r.t FROM unnest($2::text[]) AS r (t)`, true},
		{"insert select from an array", `INSERT INTO results (session_id, turn_id) SELECT r.s, r.t FROM unnest($1::text[], $2::text[]) AS r (s, t)`, false},
		{"insert without the column", `INSERT INTO outputs (id) VALUES ($1)`, false},
		{"reference table", `SELECT session_id FROM legacy_keys WHERE key_hash = $1`, true},
		{"cte", `WITH g AS (UPDATE turns SET status = 'x' WHERE session_id = $1 RETURNING 1) SELECT count(*) FROM g`, true},
		{"correlated subquery before its outer reference", `SELECT (SELECT count(*) FROM completions c WHERE c.session_id = t.session_id) FROM turns t WHERE t.session_id = $1`, true},
		{"sibling block's filter", `WITH a AS (SELECT FROM turns WHERE id = $2), b AS (SELECT FROM results WHERE session_id = $1) SELECT 1`, false},
		{"cte, second unrouted", `WITH g AS (UPDATE turns SET status = 'x' WHERE session_id = $1 RETURNING 1), h AS (DELETE FROM webhooks WHERE id = $2) SELECT 1`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bad := unrouted(tt.sql, 1)
			if got := len(bad) == 0; got != tt.routed {
				t.Errorf("routed = %v (%v), want %v", got, bad, tt.routed)
			}
		})
	}
}

// tableRef is a reference to a distributed table in a statement.
type tableRef struct {
	table, alias string
	insert       bool
	pos, depth   int // where the reference is, and its parenthesis depth
	start, end   int // its scope: its query block, inside its parentheses
}

var refPattern = regexp.MustCompile(`(?i)\b(INSERT\s+INTO|FROM|JOIN|UPDATE|DELETE\s+FROM)\s+([a-z_]+)(?:\s+(?:AS\s+)?([a-z_]+))?`)

// keywords that may follow a table name where an alias would stand.
var notAlias = map[string]bool{"where": true, "set": true, "join": true, "on": true, "left": true, "cross": true,
	"order": true, "limit": true, "group": true, "returning": true, "for": true, "values": true, "select": true,
	"inner": true, "using": true, "with": true}

// depths returns the parenthesis depth before each byte of sql.
func depths(sql string) []int {
	d := make([]int, len(sql)+1)
	n := 0
	for i := 0; i < len(sql); i++ {
		d[i] = n
		switch sql[i] {
		case '(':
			n++
		case ')':
			n--
		}
	}
	d[len(sql)] = n
	return d
}

// tableRefs finds the references to distributed tables in sql.
func tableRefs(sql string) []tableRef {
	d := depths(sql)
	var refs []tableRef
	for _, m := range refPattern.FindAllStringSubmatchIndex(sql, -1) {
		table := strings.ToLower(sql[m[4]:m[5]])
		if _, ok := distribution[table]; !ok {
			continue
		}
		r := tableRef{table: table, alias: table, pos: m[0], depth: d[m[0]], insert: strings.HasPrefix(strings.ToUpper(sql[m[2]:m[3]]), "INSERT")}
		if m[6] >= 0 && !notAlias[strings.ToLower(sql[m[6]:m[7]])] {
			r.alias = strings.ToLower(sql[m[6]:m[7]])
		}
		for r.start = r.pos; r.start > 0 && d[r.start-1] >= r.depth; r.start-- {
		}
		r.end = len(sql)
		for i := r.pos; i < len(sql); i++ {
			if d[i+1] < r.depth {
				r.end = i
				break
			}
		}
		refs = append(refs, r)
	}
	return refs
}

var (
	eqParam = regexp.MustCompile(`(?i)(?:\b([a-z_]+)\.)?\b([a-z_]+)\s*=\s*\$(\d+)\b|\$(\d+)\s*=\s*(?:\b([a-z_]+)\.)?\b([a-z_]+)\b`)
	eqCol   = regexp.MustCompile(`(?i)(?:\b([a-z_]+)\.)?\b([a-z_]+)\s*=\s*(?:\b([a-z_]+)\.)?\b([a-z_]+)\b`)
)

// unrouted returns the references of sql that are not routed by parameter
// $route (empty when the statement is routed).
func unrouted(sql string, route int) []string {
	refs := tableRefs(sql)
	d := depths(sql)
	routed := make([]bool, len(refs))
	// owner is the reference a column mention at pos belongs to: the
	// innermost reference of that alias whose scope holds pos, or, for an
	// unqualified column, the reference of the same query block.
	owner := func(alias string, pos int) int {
		best := -1
		for i, r := range refs {
			if pos < r.start || pos > r.end {
				continue
			}
			if alias == "" && d[pos] != r.depth {
				continue
			}
			if alias != "" && r.alias != alias {
				continue
			}
			if best < 0 || r.depth > refs[best].depth || (r.depth == refs[best].depth && r.pos > refs[best].pos) {
				best = i
			}
		}
		return best
	}
	isDist := func(i int, col string) bool { return i >= 0 && strings.EqualFold(distribution[refs[i].table], col) }
	for i, r := range refs {
		if r.insert {
			routed[i] = insertRouted(sql[r.pos:r.end], distribution[r.table], route)
		}
	}
	for _, m := range eqParam.FindAllStringSubmatchIndex(sql, -1) {
		alias, col, param := submatch(sql, m, 1), submatch(sql, m, 2), submatch(sql, m, 3)
		if param == "" {
			alias, col, param = submatch(sql, m, 5), submatch(sql, m, 6), submatch(sql, m, 4)
		}
		if param != strconv.Itoa(route) {
			continue
		}
		if i := owner(strings.ToLower(alias), m[0]); isDist(i, col) && !refs[i].insert {
			routed[i] = true
		}
	}
	// Through equalities with routed references' distribution columns,
	// until nothing changes.
	for changed := true; changed; {
		changed = false
		for _, m := range eqCol.FindAllStringSubmatchIndex(sql, -1) {
			a := owner(strings.ToLower(submatch(sql, m, 1)), m[0])
			b := owner(strings.ToLower(submatch(sql, m, 3)), m[0])
			if !isDist(a, submatch(sql, m, 2)) || !isDist(b, submatch(sql, m, 4)) {
				continue
			}
			for _, pair := range [][2]int{{a, b}, {b, a}} {
				if routed[pair[1]] && !routed[pair[0]] && !refs[pair[0]].insert {
					routed[pair[0]], changed = true, true
				}
			}
		}
	}
	var bad []string
	for i, r := range refs {
		if !routed[i] {
			bad = append(bad, fmt.Sprintf("%s %s at byte %d", r.table, r.alias, r.pos))
		}
	}
	return bad
}

func submatch(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// insertRouted reports whether an INSERT (from its INTO to the end of its
// scope) writes parameter $route as column col: the column list names col,
// and the value at its position in VALUES (…) or in the SELECT list is
// that parameter.
func insertRouted(ins, col string, route int) bool {
	open := strings.IndexByte(ins, '(')
	if open < 0 {
		return false
	}
	cols, rest, ok := cutParens(ins[open:])
	if !ok {
		return false
	}
	at := slices.IndexFunc(splitTop(cols), func(c string) bool { return strings.EqualFold(strings.TrimSpace(c), col) })
	if at < 0 {
		return false
	}
	rest = strings.TrimSpace(rest)
	var values []string
	switch {
	case hasPrefixFold(rest, "VALUES"):
		v, _, ok := cutParens(strings.TrimSpace(rest[len("VALUES"):]))
		if !ok {
			return false
		}
		values = splitTop(v)
	case hasPrefixFold(rest, "SELECT"):
		list := rest[len("SELECT"):]
		if end := topKeyword(list, []string{"FROM", "WHERE", "ON CONFLICT", "RETURNING"}); end >= 0 {
			list = list[:end]
		}
		values = splitTop(list)
	default:
		return false
	}
	return at < len(values) && strings.TrimSpace(values[at]) == "$"+strconv.Itoa(route)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// cutParens returns the text inside the parenthesis s starts with, and
// what follows it.
func cutParens(s string) (inside, rest string, ok bool) {
	if !strings.HasPrefix(s, "(") {
		return "", "", false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			n++
		case ')':
			n--
			if n == 0 {
				return s[1:i], s[i+1:], true
			}
		}
	}
	return "", "", false
}

// splitTop splits s at its commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	n, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			n++
		case ')':
			n--
		case ',':
			if n == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// topKeyword returns where the first of words stands in s outside
// parentheses, as a word, or -1.
func topKeyword(s string, words []string) int {
	d := depths(s)
	best := -1
	for _, w := range words {
		re := regexp.MustCompile(`(?i)\b` + strings.ReplaceAll(w, " ", `\s+`) + `\b`)
		for _, m := range re.FindAllStringIndex(s, -1) {
			if d[m[0]] == 0 && (best < 0 || m[0] < best) {
				best = m[0]
				break
			}
		}
	}
	return best
}
