package postgres_test

import (
	"strings"
	"testing"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
)

// TestListingPlans: each listing page is one scan of its index from the
// cursor (migration 11), in custom and generic plans, on 20 000 sessions,
// turns and parked calls; no listed table is read whole. (A listing of a
// session's turns by status may read them by the primary key instead.)
func TestListingPlans(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	conn := planConn(t, s,
		`INSERT INTO sessions (id, budget, created_at) SELECT 's' || g, '{}', now() - g * interval '1 second' FROM generate_series(1, 20000) g`,
		`INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at)
SELECT 's' || (g % 50 + 1), 't' || g, CASE WHEN g % 7 = 0 THEN 'waiting' ELSE 'completed' END, 'ordered', 'isolate', '[]', 'h', now() - g * interval '1 second'
FROM generate_series(1, 20000) g`,
		`INSERT INTO completions (key_hash, session_id, turn_id, call_idx, call_id, call_name, status, created_at)
SELECT sha256(g::text::bytea), 's' || (g % 50 + 1), 't' || g, 0, 'c', 'approve', CASE WHEN g % 7 = 0 THEN 'pending' ELSE 'completed' END, now() - g * interval '1 second'
FROM generate_series(1, 20000) g`,
		`ANALYZE sessions`, `ANALYZE turns`, `ANALYZE completions`,
	)
	tests := []struct {
		name, sql, params, index, table string
		// filtered: the planner may read the session's turns by another
		// index and sort the few it keeps.
		filtered bool
	}{
		{"sessions_first", postgres.ListSessionsSQL, `('9999-12-31', '', 50)`, "sessions_listing", "sessions", false},
		{"sessions_after", postgres.ListSessionsSQL, `(now() - interval '3 hours', 's10800', 50)`, "sessions_listing", "sessions", false},
		{"turns", postgres.ListTurnsSQL, `('s7', now() - interval '1 hour', 't3600', '', 50)`, "turns_listing", "turns", false},
		{"turns_status", postgres.ListTurnsSQL, `('s7', '9999-12-31', '', 'waiting', 50)`, "turns_", "turns", true},
		{"parked", postgres.ListParkedSQL, `('9999-12-31', '', '', 2147483647, 50)`, "completions_parked", "completions", false},
	}
	for _, tt := range tests {
		for mode, p := range explainBoth(t, conn, tt.name, tt.sql, tt.params) {
			if !(strings.Contains(p, "using "+tt.index) || strings.Contains(p, "Index Scan on "+tt.index)) || strings.Contains(p, "Seq Scan on "+tt.table) || (!tt.filtered && strings.Contains(p, "Sort")) {
				t.Errorf("%s listing (%s) is not one scan of %s:\n%s", tt.name, mode, tt.index, p)
			}
		}
	}
}
