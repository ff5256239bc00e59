package migrations

import (
	"testing"
	"testing/fstest"
)

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files fstest.MapFS
	}{
		{"empty", fstest.MapFS{"d/README": {Data: []byte("x")}}},
		{"no name", fstest.MapFS{"d/0001.sql": {Data: []byte("x")}}},
		{"bad version", fstest.MapFS{"d/one_init.sql": {Data: []byte("x")}}},
		{"zero version", fstest.MapFS{"d/0000_init.sql": {Data: []byte("x")}}},
		{"gap", fstest.MapFS{"d/0001_a.sql": {Data: []byte("x")}, "d/0003_c.sql": {Data: []byte("x")}}},
		{"duplicate", fstest.MapFS{"d/0001_a.sql": {Data: []byte("x")}, "d/1_b.sql": {Data: []byte("x")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if ms, err := parse(tt.files, "d"); err == nil {
				t.Errorf("parse accepted %v", ms)
			}
		})
	}
}

func TestParseOrders(t *testing.T) {
	t.Parallel()
	ms, err := parse(fstest.MapFS{
		"d/0002_second.sql": {Data: []byte("two")},
		"d/0001_first.sql":  {Data: []byte("one")},
		"d/notes.txt":       {Data: []byte("ignored")},
	}, "d")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Name != "first" || ms[1].Name != "second" || ms[1].SQL != "two" {
		t.Errorf("parse = %+v", ms)
	}
}
