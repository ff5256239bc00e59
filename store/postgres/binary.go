package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// execBinary is the recording statement's own encoding path: it encodes
// the parameters straight into PostgreSQL's binary array format and runs
// the statement prepared under a fixed name, for pools that prepare
// statements (Store.binary); every other statement goes through pgx. Head
// to head with pgx's encoding on workload 1 (scripts/bench-ab.sh, 8 runs)
// it ran 3% more turns/s (7 of 8 runs ahead) for 7% less turnd CPU per
// turn; BenchmarkRecordArgs encodes a batch of 12 turns over 10× faster, with
// no allocation against pgx's 626.

// Element types of the arrays execBinary encodes, and their array types
// (pg_type.oid; fixed since PostgreSQL's first releases).
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt4        = 23
	oidText        = 25
	oidTimestamptz = 1184

	oidBoolArray        = 1000
	oidByteaArray       = 1001
	oidInt4Array        = 1007
	oidTextArray        = 1009
	oidInt8Array        = 1016
	oidTimestamptzArray = 1185
)

// y2k is where PostgreSQL's binary timestamps count from, in Unix
// microseconds.
const y2k = 946_684_800_000_000

// appendArrayHeader appends the header of a one-dimensional array of n
// elements of type elem (an empty array too has its dimension, of length 0,
// as pgx sends it).
func appendArrayHeader(b []byte, elem uint32, n int, hasNull bool) []byte {
	b = binary.BigEndian.AppendUint32(b, 1)
	var flags uint32
	if hasNull {
		flags = 1
	}
	b = binary.BigEndian.AppendUint32(b, flags)
	b = binary.BigEndian.AppendUint32(b, elem)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	return binary.BigEndian.AppendUint32(b, 1) // lower bound
}

// appendNull appends a NULL element.
func appendNull(b []byte) []byte { return binary.BigEndian.AppendUint32(b, math.MaxUint32) }

// appendBinaryParam appends v, a parameter of type oid, in binary format.
// It knows the slice types the hot-path statements pass; anything else is
// an error (a bug in the statement's arguments, or a statement whose
// parameter types differ from what its arguments say).
func appendBinaryParam(b []byte, oid uint32, v any) ([]byte, error) {
	var array uint32 // the array type v encodes as
	switch v := v.(type) {
	case []string:
		array, b = oidTextArray, appendArray(b, oidText, v, nil, appendText[string])
	case []*string:
		array, b = oidTextArray, appendArray(b, oidText, v, func(s *string) bool { return s == nil }, func(b []byte, s *string) []byte { return appendText(b, *s) })
	case [][]byte:
		array, b = oidByteaArray, appendArray(b, oidBytea, v, func(s []byte) bool { return s == nil }, appendText[[]byte])
	case []int64:
		array, b = oidInt8Array, appendArray(b, oidInt8, v, nil, func(b []byte, n int64) []byte {
			return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(b, 8), uint64(n))
		})
	case []int32:
		array, b = oidInt4Array, appendArray(b, oidInt4, v, nil, func(b []byte, n int32) []byte {
			return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(b, 4), uint32(n))
		})
	case []bool:
		array, b = oidBoolArray, appendArray(b, oidBool, v, nil, func(b []byte, t bool) []byte {
			if t {
				return append(binary.BigEndian.AppendUint32(b, 1), 1)
			}
			return append(binary.BigEndian.AppendUint32(b, 1), 0)
		})
	case []time.Time:
		array, b = oidTimestamptzArray, appendArray(b, oidTimestamptz, v, nil, func(b []byte, t time.Time) []byte {
			return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(b, 8), uint64(t.UnixMicro()-y2k))
		})
	case []pgtype.Timestamptz:
		for _, t := range v {
			if t.InfinityModifier != pgtype.Finite {
				return nil, errors.New("binary parameter: infinite timestamptz")
			}
		}
		array, b = oidTimestamptzArray, appendArray(b, oidTimestamptz, v, func(t pgtype.Timestamptz) bool { return !t.Valid }, func(b []byte, t pgtype.Timestamptz) []byte {
			return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(b, 8), uint64(t.Time.UnixMicro()-y2k))
		})
	}
	if array == 0 || array != oid {
		return nil, fmt.Errorf("binary parameter: %T for type oid %d", v, oid)
	}
	return b, nil
}

// appendArray appends the array of v, of elements of type elem, whose
// element e is NULL when null(e) (never when null is nil) and is otherwise
// appended by each.
func appendArray[E any](b []byte, elem uint32, v []E, null func(E) bool, each func([]byte, E) []byte) []byte {
	hasNull := false
	for _, e := range v {
		hasNull = hasNull || null != nil && null(e)
	}
	b = appendArrayHeader(b, elem, len(v), hasNull)
	for _, e := range v {
		if hasNull && null(e) {
			b = appendNull(b)
			continue
		}
		b = each(b, e)
	}
	return b
}

// appendText appends a text or bytea element.
func appendText[S string | []byte](b []byte, s S) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// binaryFormats holds format codes: every parameter and column in binary.
var binaryFormats = func() []int16 {
	f := make([]int16, 128)
	for i := range f {
		f[i] = pgx.BinaryFormatCode
	}
	return f
}()

// paramBufs recycles the parameter buffers of execBinary.
var paramBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// execBinary runs p, prepared on a group pool connection under name, with args
// (in p's parameter order) encoded by appendBinaryParam, and hands each
// result row's values, binary-encoded, to row (the values are valid only
// during the call). columns is the number of columns the statement returns.
func (s *Store) execBinary(ctx context.Context, name string, p statement, args []any, columns int, row func([][]byte) error) error {
	if len(args) > len(binaryFormats) || columns > len(binaryFormats) {
		return fmt.Errorf("statement %s: %d parameters, %d columns: too many for execBinary", name, len(args), columns)
	}
	c, err := s.groupPool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	sd, err := c.Conn().Prepare(ctx, name, p.sql)
	if err != nil {
		return err
	}
	if len(sd.ParamOIDs) != len(args) || len(sd.Fields) != columns {
		return fmt.Errorf("statement %s: prepared with %d parameters and %d columns, called with %d and %d",
			name, len(sd.ParamOIDs), len(sd.Fields), len(args), columns)
	}
	bp := paramBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 { // do not keep a large outputs batch's buffer
			paramBufs.Put(bp)
		}
	}()
	buf := (*bp)[:0]
	// Offsets first: buf may grow while it is filled.
	ends := make([]int, len(args))
	for i, a := range args {
		if buf, err = appendBinaryParam(buf, sd.ParamOIDs[i], a); err != nil {
			return fmt.Errorf("statement %s: parameter $%d: %w", name, i+1, err)
		}
		ends[i] = len(buf)
	}
	*bp = buf
	values := make([][]byte, len(args))
	start := 0
	for i, end := range ends {
		values[i], start = buf[start:end:end], end
	}
	rr := c.Conn().PgConn().ExecPrepared(ctx, name, values, binaryFormats[:len(args)], binaryFormats[:columns])
	var rowErr error
	for rr.NextRow() {
		if rowErr == nil {
			rowErr = row(rr.Values())
		}
	}
	_, err = rr.Close()
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "0A000" || pgErr.Code == "26000") {
			// The prepared statement went stale (a schema change made
			// its plan's result type change, or it was deallocated
			// behind the connection's back): prepare it afresh next time.
			_ = c.Conn().Deallocate(context.WithoutCancel(ctx), name)
		}
		return err
	}
	return rowErr
}

// Decoders of binary column values for execBinary's callers.

func binaryInt8(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("int8 column of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func binaryBool(v []byte) (bool, error) {
	if len(v) != 1 {
		return false, fmt.Errorf("bool column of %d bytes", len(v))
	}
	return v[0] != 0, nil
}
