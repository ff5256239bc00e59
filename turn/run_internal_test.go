package turn

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/turnd/turnd/dispatch"
)

// The line data structs encode as the maps they replaced did (sorted keys,
// optional keys absent), so ledgers keep their bytes.
func TestLineDataAsMaps(t *testing.T) {
	t.Parallel()
	mapJSON := func(m map[string]any) string {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, res := range []Result{
		{Status: CallOK, Attempts: 1},
		{Status: CallFailed, Attempts: 3, Error: &CallError{Code: "tool_unavailable", Message: "down <x> & \"y\""}},
		{Status: CallOK, Attempts: 1, Truncated: true, OriginalBytes: 40960, OriginalLines: 0, OutputID: "out_1"},
		{Status: CallRefused, Error: &CallError{Code: "invalid_arguments", Message: "bad"}},
	} {
		want := map[string]any{"status": res.Status, "attempts": res.Attempts}
		if res.Truncated {
			want["truncated"], want["original_bytes"], want["original_lines"] = true, res.OriginalBytes, res.OriginalLines
		}
		if res.OutputID != "" {
			want["output_id"] = res.OutputID
		}
		if res.Error != nil {
			want["error"] = res.Error
		}
		if got := string(answeredData(res, nil)); got != mapJSON(want) {
			t.Errorf("answered data %s, want %s", got, mapJSON(want))
		}
	}
	got := string(admittedLine(dispatch.Call{ID: "c", Name: "search<1>"}, 3, dispatch.EffectRead, nil).Data)
	if want := mapJSON(map[string]any{"name": "search<1>", "index": 3, "effect": dispatch.EffectRead}); got != want {
		t.Errorf("admitted data %s, want %s", got, want)
	}
}

// TestCheckResultCalls: a commit's results must be of the turn's calls, at
// their index and under their id.
func TestCheckResultCalls(t *testing.T) {
	calls := []Call{{ID: "a"}, {ID: "b"}, {ID: "a"}}
	good := []Result{{Index: 0, CallID: "a"}, {Index: 2, CallID: "a"}, {Index: 1, CallID: "b"}}
	if err := CheckResultCalls(calls, good); err != nil {
		t.Errorf("results of the turn's calls: %v", err)
	}
	if err := CheckResultCalls(calls, nil); err != nil {
		t.Errorf("no results: %v", err)
	}
	for name, res := range map[string]Result{
		"another call's id": {Index: 1, CallID: "a"},
		"an index past":     {Index: 3, CallID: "a"},
		"a negative index":  {Index: -1, CallID: "a"},
		"an empty id":       {Index: 0},
	} {
		if err := CheckResultCalls(calls, append(slices.Clone(good), res)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
