package turn

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
)

// The ledger data as json.Marshal wrote it from these structs before it
// was written by hand: the reference the hand-written data must equal.

type admittedDataJSON struct {
	Effect dispatch.Effect `json:"effect"`
	Index  int             `json:"index"`
	Name   string          `json:"name"`
}

type answeredDataJSON struct {
	Attempts      int        `json:"attempts"`
	Error         *CallError `json:"error,omitempty"`
	OriginalBytes *int64     `json:"original_bytes,omitempty"`
	OriginalLines *int64     `json:"original_lines,omitempty"`
	OutputID      string     `json:"output_id,omitempty"`
	Status        CallStatus `json:"status"`
	Truncated     bool       `json:"truncated,omitempty"`
}

type callRefJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type receivedDataJSON struct {
	Calls         []callRefJSON `json:"calls"`
	Mode          string        `json:"mode"`
	FailurePolicy string        `json:"failure_policy"`
}

// awkward strings: plain, escapes, HTML, control characters, line
// separators, non-ASCII, invalid UTF-8.
var awkward = []string{"", "read_file", `q"b\s/`, "<a&b>", "ctl\x00\x01\n\t\x1f\x7f", "\u2028\u2029", "é😀", "bad\xff\xfe", "a\\u0041"}

func TestLedgerDataAsMarshalled(t *testing.T) {
	t.Parallel()
	same := func(what string, got []byte, v any) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", what, got, want)
		}
	}
	for i, s := range awkward {
		l := admittedLine(dispatch.Call{ID: "c", Name: s}, i*1000-1, dispatch.Effect(s))
		same("admitted", l.Data, admittedDataJSON{Effect: dispatch.Effect(s), Index: i*1000 - 1, Name: s})

		for _, res := range []Result{
			{Attempts: i, Status: CallStatus(s)},
			{Attempts: 3, Status: CallFailed, Error: &CallError{Code: s, Message: s + " failed"}},
			{Attempts: 1, Status: CallOK, Truncated: true, OriginalBytes: 1 << 40, OriginalLines: int64(i), OutputID: s},
			{Attempts: 1, Status: CallOK, OutputID: "out_" + s},
			{Status: CallRefused, Error: &CallError{}, Truncated: true},
		} {
			want := answeredDataJSON{Attempts: res.Attempts, Error: res.Error, OutputID: res.OutputID, Status: res.Status}
			if res.Truncated {
				want.Truncated, want.OriginalBytes, want.OriginalLines = true, &res.OriginalBytes, &res.OriginalLines
			}
			same("answered", answeredData(res, dispatch.Outcome{}), want)
		}

		settled := settledLine(TurnKey{SessionID: "s", TurnID: "t"}, Status(s), time.Now())
		same("settled", settled.Data, map[string]any{"status": Status(s)})
	}
	for _, calls := range [][]Call{nil, {{ID: "a", Name: "b"}}, {{ID: awkward[2], Name: awkward[3]}, {ID: awkward[7], Name: awkward[5]}, {}}} {
		for _, s := range awkward {
			tu := Turn{Calls: calls, Mode: dispatch.Mode(s), FailurePolicy: dispatch.FailurePolicy(s)}
			want := receivedDataJSON{Calls: make([]callRefJSON, len(calls)), Mode: s, FailurePolicy: s}
			for i, c := range calls {
				want.Calls[i] = callRefJSON{c.ID, c.Name}
			}
			same("received", receivedLine(tu, time.Now()).Data, want)
		}
	}
}
