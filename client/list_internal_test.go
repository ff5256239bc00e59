package client

import (
	"errors"
	"testing"
)

// pages reads page after page until one without a NextAfter, reads no
// further once the caller stops, and yields an error once, last.
func TestPages(t *testing.T) {
	t.Parallel()
	listing := map[string]*TurnPage{
		"":   {Turns: []TurnSummary{{ID: "t5"}, {ID: "t4"}}, NextAfter: "c4"},
		"c4": {Turns: []TurnSummary{{ID: "t3"}, {ID: "t2"}}, NextAfter: "c2"},
		"c2": {Turns: []TurnSummary{{ID: "t1"}}},
	}
	var reads []string
	read := func(o ListOptions) (*TurnPage, error) {
		reads = append(reads, o.After)
		if p, ok := listing[o.After]; ok {
			return p, nil
		}
		return nil, errors.New("no such page")
	}

	var ids string
	for tr, err := range pages(ListOptions{Limit: 2}, read) {
		if err != nil {
			t.Fatal(err)
		}
		ids += tr.ID + " "
	}
	if ids != "t5 t4 t3 t2 t1 " || len(reads) != 3 {
		t.Errorf("rows %q after reads %q", ids, reads)
	}

	reads = nil
	for tr := range pages(ListOptions{}, read) {
		if tr.ID == "t4" {
			break
		}
	}
	if len(reads) != 1 {
		t.Errorf("stopping on the first page read %q", reads)
	}

	var errs int
	for tr, err := range pages(ListOptions{After: "c2"}, func(o ListOptions) (*TurnPage, error) {
		if o.After == "c2" {
			return &TurnPage{Turns: []TurnSummary{{ID: "t1"}}, NextAfter: "gone"}, nil
		}
		return read(o)
	}) {
		if err != nil {
			errs++
			if tr.ID != "" {
				t.Errorf("an error came with row %q", tr.ID)
			}
		}
	}
	if errs != 1 {
		t.Errorf("%d errors yielded, want 1", errs)
	}
}
