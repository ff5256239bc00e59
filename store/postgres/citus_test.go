package postgres_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/store/postgres"
)

// referenceTables are the tables Citus copies to every node: read by a key
// that is not a session's, and written once.
var referenceTables = []string{"settings", "legacy_keys", "legacy_outputs"}

// TestSchemaDistributable holds the latest schema to what Citus needs to
// shard it by session with every table co-located: each table is either
// distributed by its session column (postgres.Distribution), with every
// primary key, unique index and foreign key including that column on both
// sides, or a reference table; no sequence; and migrations.Citus
// distributes each table exactly so, co-located with sessions.
func TestSchemaDistributable(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ctx := t.Context()
	rows, err := s.Pool().Query(ctx, `SELECT c.relname FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
    AND c.relname NOT IN ('goose_db_version', 'schema_migrations')
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		if _, ok := postgres.Distribution[table]; !ok && !slices.Contains(referenceTables, table) {
			t.Errorf("table %s is neither distributed by session nor a reference table", table)
		}
	}
	if len(tables) != len(postgres.Distribution)+len(referenceTables) {
		t.Errorf("schema has tables %v; want the %d distributed and %v", tables, len(postgres.Distribution), referenceTables)
	}

	// Every unique index (primary keys among them) and foreign key of a
	// distributed table includes its distribution column; a foreign key
	// pairs it with the referenced table's.
	rows, err = s.Pool().Query(ctx, `SELECT t.relname, i.relname,
    array(SELECT a.attname::text FROM unnest(x.indkey::int2[]) AS k (n) JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relnamespace = current_schema()::regnamespace AND x.indisunique`)
	if err != nil {
		t.Fatal(err)
	}
	var table, index string
	var cols []string
	checked := 0
	_, err = pgx.ForEachRow(rows, []any{&table, &index, &cols}, func() error {
		if dist, ok := postgres.Distribution[table]; ok {
			checked++
			if !slices.Contains(cols, dist) {
				t.Errorf("unique index %s of %s on %v lacks the distribution column %s", index, table, cols, dist)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < len(postgres.Distribution) {
		t.Errorf("checked %d unique indexes of distributed tables, want at least one each", checked)
	}
	rows, err = s.Pool().Query(ctx, `SELECT c.conname, t.relname, r.relname,
    array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY AS k (n, o) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o),
    array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY AS k (n, o) JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)
FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class r ON r.oid = c.confrelid
WHERE c.contype = 'f' AND t.relnamespace = current_schema()::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	var name, ref string
	var refCols []string
	fks := 0
	_, err = pgx.ForEachRow(rows, []any{&name, &table, &ref, &cols, &refCols}, func() error {
		fks++
		i := slices.Index(cols, postgres.Distribution[table])
		if i < 0 || refCols[i] != postgres.Distribution[ref] {
			t.Errorf("foreign key %s of %s %v → %s %v does not pair the distribution columns", name, table, cols, ref, refCols)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fks == 0 {
		t.Error("no foreign key found: is the query still looking in the test's schema?")
	}
	var sequences int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind = 'S' AND relname NOT LIKE 'goose_db_version%'`).Scan(&sequences); err != nil || sequences != 0 {
		t.Errorf("%d sequences (%v): a sequence would be one counter for every shard (goose's own stays on the coordinator)", sequences, err)
	}
	// Co-location needs the distribution columns to agree in type and
	// collation.
	rows, err = s.Pool().Query(ctx, `SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), coalesce(co.collname, '')
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attnum > 0`)
	if err != nil {
		t.Fatal(err)
	}
	var col, typ, coll string
	_, err = pgx.ForEachRow(rows, []any{&table, &col, &typ, &coll}, func() error {
		if postgres.Distribution[table] == col && (typ != "text" || coll != "C") {
			t.Errorf("distribution column %s.%s is %s collate %q, want text collate \"C\"", table, col, typ, coll)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkCitusFile(t, tables)
}

// checkCitusFile checks that migrations.Citus distributes each table once,
// as the schema test wants it.
func checkCitusFile(t *testing.T, tables []string) {
	t.Helper()
	dist := regexp.MustCompile(`^SELECT create_distributed_table\('([a-z_]+)', '([a-z_]+)'(?:, colocate_with => '([a-z_]+)')?\) WHERE NOT EXISTS \(SELECT FROM pg_dist_partition WHERE logicalrelid = '([a-z_]+)'::regclass\)$`)
	refer := regexp.MustCompile(`^SELECT create_reference_table\('([a-z_]+)'\) WHERE NOT EXISTS \(SELECT FROM pg_dist_partition WHERE logicalrelid = '([a-z_]+)'::regclass\)$`)
	seen := map[string]int{}
	for i, st := range migrations.Citus() {
		switch m, r := dist.FindStringSubmatch(st), refer.FindStringSubmatch(st); {
		case m != nil:
			table, col, with, guard := m[1], m[2], m[3], m[4]
			seen[table]++
			want := "sessions"
			if table == "sessions" {
				want = ""
				if i != 0 {
					t.Errorf("sessions is distributed by statement %d; the others co-locate with it, so it comes first", i)
				}
			}
			if col != postgres.Distribution[table] || with != want || guard != table {
				t.Errorf("Citus statement %q: want %s by %s co-located with %q", st, table, postgres.Distribution[table], want)
			}
		case r != nil:
			seen[r[1]]++
			if !slices.Contains(referenceTables, r[1]) || r[2] != r[1] {
				t.Errorf("Citus statement %q: %s is not a reference table", st, r[1])
			}
		default:
			t.Errorf("Citus statement %q is neither form", st)
		}
	}
	for _, table := range tables {
		if seen[table] != 1 {
			t.Errorf("migrations.Citus distributes %s %d times, want once", table, seen[table])
		}
	}
	if len(seen) != len(tables) {
		t.Errorf("migrations.Citus names %d tables, the schema has %d: %s", len(seen), len(tables), strings.Join(tables, ", "))
	}
}

// On plain PostgreSQL, Distribute refuses and changes nothing.
func TestDistributeNeedsCitus(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	if err := s.Distribute(t.Context()); !errors.Is(err, postgres.ErrNotCitus) {
		t.Fatalf("Distribute on plain PostgreSQL: %v, want ErrNotCitus", err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(fmt.Errorf("the store after a refused Distribute: %w", err))
	}
}
