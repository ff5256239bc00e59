package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
)

// oidOf is the type of a parameter that takes v, by v's Go type as the
// parameter structs use them (a string may also be a json parameter's).
func oidOf(v any) (uint32, error) {
	switch v.(type) {
	case string:
		return pgtype.TextOID, nil
	case bool:
		return pgtype.BoolOID, nil
	case int32:
		return pgtype.Int4OID, nil
	case int64:
		return pgtype.Int8OID, nil
	case []byte:
		return pgtype.ByteaOID, nil
	case time.Time, pgtype.Timestamptz:
		return pgtype.TimestamptzOID, nil
	case []string, []*string:
		return pgtype.TextArrayOID, nil
	case []bool:
		return pgtype.BoolArrayOID, nil
	case []int32:
		return pgtype.Int4ArrayOID, nil
	case []int64:
		return pgtype.Int8ArrayOID, nil
	case [][]byte:
		return pgtype.ByteaArrayOID, nil
	case []time.Time, []pgtype.Timestamptz:
		return pgtype.TimestamptzArrayOID, nil
	}
	return 0, fmt.Errorf("no type for %T", v)
}

// TestStatementArgTypes: every variant of every statement built from parts
// takes its parameter struct's arguments in order — each argument's type
// is its parameter's, as the server infers it — and runs with them (in a
// transaction rolled back).
func TestStatementArgTypes(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ctx := t.Context()
	cases, err := postgres.StatementCases()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range cases {
		sd, err := conn.Conn().Prepare(ctx, "", c.SQL)
		if err != nil {
			t.Errorf("%s: preparing: %v", c.Name, err)
			continue
		}
		if len(sd.ParamOIDs) != len(c.Args) {
			t.Errorf("%s: %d parameters, %d arguments", c.Name, len(sd.ParamOIDs), len(c.Args))
			continue
		}
		for i, a := range c.Args {
			oid, err := oidOf(a)
			if oid == pgtype.TextOID && sd.ParamOIDs[i] == pgtype.JSONOID {
				continue
			}
			if err != nil || oid != sd.ParamOIDs[i] {
				t.Errorf("%s: $%d is of type %d, argument %T (type %d, %v)", c.Name, i+1, sd.ParamOIDs[i], a, oid, err)
			}
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, c.SQL, c.Args...)
			if err != nil {
				return err
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Errorf("%s: running: %v", c.Name, err)
		}
	}
}

var errRollback = errors.New("rollback")
