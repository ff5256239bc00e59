package postgres

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/turn/storetest"
)

// TestAppendBinaryParam holds execBinary's encoder to pgx's own binary
// encoding of the same values, byte for byte.
func TestAppendBinaryParam(t *testing.T) {
	str := func(s string) *string { return &s }
	at := func(s string) pgtype.Timestamptz {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return pgtype.Timestamptz{Time: tm, Valid: true}
	}
	cases := []struct {
		name string
		oid  uint32
		v    any
	}{
		{"text", oidTextArray, []string{"a", "", "héllo ✓", strings.Repeat("x", 70000), "quote\"back\\slash"}},
		{"text empty", oidTextArray, []string{}},
		{"nullable text", oidTextArray, []*string{str("a"), nil, str(""), str("z")}},
		{"nullable text no null", oidTextArray, []*string{str("a")}},
		{"nullable text empty", oidTextArray, []*string{}},
		{"bytea", oidByteaArray, [][]byte{{0, 1, 2}, {}, nil, []byte("data")}},
		{"bytea empty", oidByteaArray, [][]byte{}},
		{"int8", oidInt8Array, []int64{0, 1, -1, math.MaxInt64, math.MinInt64}},
		{"int8 empty", oidInt8Array, []int64{}},
		{"int4", oidInt4Array, []int32{0, 7, -7, math.MaxInt32, math.MinInt32}},
		{"bool", oidBoolArray, []bool{true, false, true}},
		{"timestamptz", oidTimestamptzArray, []pgtype.Timestamptz{
			at("2026-11-30T03:00:00.123456Z"), at("2026-11-30T03:00:00.123456789+02:00"), {},
			at("1999-12-31T23:59:59.999999Z"), at("1970-01-01T00:00:00Z"), at("1960-06-01T12:00:00.5Z"),
		}},
		{"timestamptz empty", oidTimestamptzArray, []pgtype.Timestamptz{}},
		{"time", oidTimestamptzArray, []time.Time{
			at("2026-11-30T03:00:00.123456Z").Time, at("2026-11-30T03:00:00.123456789+02:00").Time,
			at("1999-12-31T23:59:59.999999Z").Time, at("1960-06-01T12:00:00.5Z").Time,
		}},
		{"time empty", oidTimestamptzArray, []time.Time{}},
	}
	m := pgtype.NewMap()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := m.Encode(c.oid, pgx.BinaryFormatCode, c.v, nil)
			if err != nil {
				t.Fatalf("pgx: %v", err)
			}
			got, err := appendBinaryParam([]byte("prefix"), c.oid, c.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
				t.Fatalf("encoded\n%x\npgx encodes\n%x", got[len("prefix"):], want)
			}
		})
	}
}

func TestAppendBinaryParamRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		oid  uint32
		v    any
	}{
		{"text for int8[]", oidInt8Array, []string{"1"}},
		{"int8 for int4[]", oidInt4Array, []int64{1}},
		{"scalar", oidTextArray, "a"},
		{"nil", oidTextArray, nil},
		{"map", oidTextArray, map[string]string{}},
		{"infinity", oidTimestamptzArray, []pgtype.Timestamptz{{InfinityModifier: pgtype.Infinity, Valid: true}}},
	} {
		if b, err := appendBinaryParam(nil, c.oid, c.v); err == nil {
			t.Errorf("%s: encoded %x, want an error", c.name, b)
		}
	}
}

func TestBinaryColumns(t *testing.T) {
	if n, err := binaryInt8([]byte{0, 0, 0, 0, 0, 0, 1, 2}); err != nil || n != 258 {
		t.Errorf("int8: %d, %v", n, err)
	}
	if n, err := binaryInt8([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}); err != nil || n != -2 {
		t.Errorf("int8: %d, %v", n, err)
	}
	for _, v := range [][]byte{nil, {1, 2, 3}} {
		if _, err := binaryInt8(v); err == nil {
			t.Errorf("int8 of %d bytes: no error", len(v))
		}
		if _, err := binaryBool(v); err == nil {
			t.Errorf("bool of %d bytes: no error", len(v))
		}
	}
	if b, err := binaryBool([]byte{1}); err != nil || !b {
		t.Errorf("bool: %v, %v", b, err)
	}
	if b, err := binaryBool([]byte{0}); err != nil || b {
		t.Errorf("bool: %v, %v", b, err)
	}
}

func TestRecordNames(t *testing.T) {
	if len(recordNames) != len(recordSQL) {
		t.Fatalf("%d names for %d recording statements", len(recordNames), len(recordSQL))
	}
}

// recordArgsSample is the recording statement's arguments for 12 turns of
// 4 calls each, with their parameter types.
func recordArgsSample(tb testing.TB) ([]any, []uint32) {
	tb.Helper()
	batch := make([]*recordCall, 12)
	for i := range batch {
		r := storetest.WholeTurn(fmt.Sprintf("s%d", i), "t", 4)
		batch[i] = &recordCall{}
		if err := batch[i].rec.encode(&r); err != nil {
			tb.Fatal(err)
		}
	}
	p := makeRecordParams(batch)
	for _, c := range batch {
		p.add(&c.rec)
	}
	args := p.args()
	oids := make([]uint32, len(args))
	for i, a := range args {
		switch a.(type) {
		case []string, []*string:
			oids[i] = oidTextArray
		case []int64:
			oids[i] = oidInt8Array
		case []int32:
			oids[i] = oidInt4Array
		case []bool:
			oids[i] = oidBoolArray
		case [][]byte:
			oids[i] = oidByteaArray
		default:
			oids[i] = oidTimestamptzArray
		}
	}
	return args, oids
}

// BenchmarkRecordArgs encodes the recording statement's arguments for a
// batch of 12 turns with pgx and with appendBinaryParam.
func BenchmarkRecordArgs(b *testing.B) {
	args, oids := recordArgsSample(b)
	m := pgtype.NewMap()
	encoders := []struct {
		name   string
		encode func(buf []byte, oid uint32, v any) ([]byte, error)
	}{
		{"pgx", func(buf []byte, oid uint32, v any) ([]byte, error) {
			return m.Encode(oid, pgx.BinaryFormatCode, v, buf)
		}},
		{"binary", appendBinaryParam},
	}
	for _, e := range encoders {
		b.Run(e.name, func(b *testing.B) {
			buf := make([]byte, 0, 64<<10)
			b.ReportAllocs()
			for b.Loop() {
				buf = buf[:0]
				for i, a := range args {
					var err error
					if buf, err = e.encode(buf, oids[i], a); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// FuzzAppendBinaryParam holds appendBinaryParam to pgx's encoding of the
// same values, for arrays of every element type made from the input.
func FuzzAppendBinaryParam(f *testing.F) {
	f.Add("a\x00b", int64(0), true, false)
	f.Add("héllo ✓\xff", int64(-946_684_800_000_001), false, true)
	f.Add("", int64(math.MaxInt64/1000), true, true)
	m := pgtype.NewMap()
	f.Fuzz(func(t *testing.T, s string, n int64, b, null bool) {
		us := n % (1 << 50) // times PostgreSQL and time.Time both hold
		tm := time.UnixMicro(us)
		var nullable *string
		if !null {
			nullable = &s
		}
		var ts pgtype.Timestamptz
		if !null {
			ts = pgtype.Timestamptz{Time: tm, Valid: true}
		}
		for _, c := range []struct {
			oid uint32
			v   any
		}{
			{oidTextArray, []string{s, s[:len(s)/2]}},
			{oidTextArray, []*string{nullable, &s}},
			{oidByteaArray, [][]byte{[]byte(s), nil}},
			{oidInt8Array, []int64{n, -n}},
			{oidInt4Array, []int32{int32(n), int32(n >> 32)}},
			{oidBoolArray, []bool{b, !b}},
			{oidTimestamptzArray, []time.Time{tm}},
			{oidTimestamptzArray, []pgtype.Timestamptz{ts, {Time: tm, Valid: true}}},
		} {
			want, err := m.Encode(c.oid, pgx.BinaryFormatCode, c.v, nil)
			if err != nil {
				t.Fatalf("pgx %T: %v", c.v, err)
			}
			got, err := appendBinaryParam(nil, c.oid, c.v)
			if err != nil {
				t.Fatalf("%T: %v", c.v, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%T %v: encoded\n%x\npgx encodes\n%x", c.v, c.v, got, want)
			}
		}
	})
}
