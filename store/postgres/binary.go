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

// Statements on the hot path take arrays of a dozen values per turn, and
// pgx encodes an array element by element through interface values: for a
// recording statement of ten turns that is hundreds of small allocations
// and most of the statement's encoding time. execBinary instead encodes the
// parameters itself, straight into PostgreSQL's binary array format, and
// runs a statement prepared on the connection under a fixed name.
//
// It serves only pools that prepare statements (pgx's default query exec
// mode): a pool set up for a transaction-pooling proxy (another
// default_query_exec_mode in the URL) keeps pgx's own path (Store.binary).

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

// appendBytes appends an element of len(v) bytes.
func appendBytes(b []byte, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// appendBinaryParam appends v, a parameter of type oid, in binary format.
// It knows the slice types the hot-path statements pass; anything else is
// an error (a bug in the statement's arguments, or a statement whose
// parameter types differ from what its arguments say).
func appendBinaryParam(b []byte, oid uint32, v any) ([]byte, error) {
	mismatch := func() ([]byte, error) {
		return nil, fmt.Errorf("binary parameter: %T for type oid %d", v, oid)
	}
	switch v := v.(type) {
	case []string:
		if oid != oidTextArray {
			return mismatch()
		}
		b = appendArrayHeader(b, oidText, len(v), false)
		for _, s := range v {
			b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		}
	case []*string:
		if oid != oidTextArray {
			return mismatch()
		}
		hasNull := false
		for _, s := range v {
			hasNull = hasNull || s == nil
		}
		b = appendArrayHeader(b, oidText, len(v), hasNull)
		for _, s := range v {
			if s == nil {
				b = appendNull(b)
				continue
			}
			b = binary.BigEndian.AppendUint32(b, uint32(len(*s)))
			b = append(b, *s...)
		}
	case [][]byte:
		if oid != oidByteaArray {
			return mismatch()
		}
		hasNull := false
		for _, s := range v {
			hasNull = hasNull || s == nil
		}
		b = appendArrayHeader(b, oidBytea, len(v), hasNull)
		for _, s := range v {
			if s == nil {
				b = appendNull(b)
				continue
			}
			b = appendBytes(b, s)
		}
	case []int64:
		if oid != oidInt8Array {
			return mismatch()
		}
		b = appendArrayHeader(b, oidInt8, len(v), false)
		for _, n := range v {
			b = binary.BigEndian.AppendUint32(b, 8)
			b = binary.BigEndian.AppendUint64(b, uint64(n))
		}
	case []int32:
		if oid != oidInt4Array {
			return mismatch()
		}
		b = appendArrayHeader(b, oidInt4, len(v), false)
		for _, n := range v {
			b = binary.BigEndian.AppendUint32(b, 4)
			b = binary.BigEndian.AppendUint32(b, uint32(n))
		}
	case []bool:
		if oid != oidBoolArray {
			return mismatch()
		}
		b = appendArrayHeader(b, oidBool, len(v), false)
		for _, t := range v {
			b = binary.BigEndian.AppendUint32(b, 1)
			if t {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case []pgtype.Timestamptz:
		if oid != oidTimestamptzArray {
			return mismatch()
		}
		hasNull := false
		for _, t := range v {
			if t.InfinityModifier != pgtype.Finite {
				return nil, errors.New("binary parameter: infinite timestamptz")
			}
			hasNull = hasNull || !t.Valid
		}
		b = appendArrayHeader(b, oidTimestamptz, len(v), hasNull)
		for _, t := range v {
			if !t.Valid {
				b = appendNull(b)
				continue
			}
			b = binary.BigEndian.AppendUint32(b, 8)
			b = binary.BigEndian.AppendUint64(b, uint64(unixMicro(t.Time)-y2k))
		}
	default:
		return mismatch()
	}
	return b, nil
}

// unixMicro is t in microseconds since the Unix epoch, rounded down (as
// pgx encodes it).
func unixMicro(t time.Time) int64 { return t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 }

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

// execBinary runs p, prepared on a pool connection under name, with args
// (in p's parameter order) encoded by appendBinaryParam, and hands each
// result row's values, binary-encoded, to row (the values are valid only
// during the call). columns is the number of columns the statement returns.
func (s *Store) execBinary(ctx context.Context, name string, p positional, args []any, columns int, row func([][]byte) error) error {
	if len(args) > len(binaryFormats) || columns > len(binaryFormats) {
		return fmt.Errorf("statement %s: %d parameters, %d columns: too many for execBinary", name, len(args), columns)
	}
	c, err := s.pool.Acquire(ctx)
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
