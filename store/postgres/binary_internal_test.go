package postgres

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
