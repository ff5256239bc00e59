package turn

import (
	"crypto/sha256"
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
	// Resources: a call of a tool that declares resources.
	Resources []string `json:"resources,omitempty"`
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
	Streamed      bool          `json:"streamed,omitempty"`
}

type tryJSON struct {
	FinishedAt time.Time `json:"finished_at"`
	Outcome    string    `json:"outcome"`
	StartedAt  time.Time `json:"started_at"`
}

// triedDataJSON is a retried call's call_answered data: the answered
// data with attempt_times first.
type triedDataJSON struct {
	AttemptTimes []tryJSON `json:"attempt_times"`
	answeredDataJSON
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
		l := admittedLine(dispatch.Call{ID: "c", Name: s}, i*1000-1, dispatch.Effect(s), nil)
		same("admitted", l.Data, admittedDataJSON{Effect: dispatch.Effect(s), Index: i*1000 - 1, Name: s})
		res := []string{s, "file:" + s}
		l = admittedLine(dispatch.Call{ID: "c", Name: s}, i, dispatch.Effect(s), res)
		same("admitted with resources", l.Data, admittedDataJSON{Effect: dispatch.Effect(s), Index: i, Name: s, Resources: res})

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
			same("answered", answeredData(res, nil), want)

			// The same call retried: its tries come first.
			at := time.Date(2026, 12, 2, 6, 0, i, i*1000, time.UTC)
			timedOut := &dispatch.Error{Code: "tool_unavailable", TimedOut: true}
			tries := []dispatch.Try{
				{StartedAt: at, FinishedAt: at.Add(time.Millisecond), Status: dispatch.StatusError, Err: &dispatch.Error{Code: s}},
				{StartedAt: at.Add(time.Second), FinishedAt: at.Add(2 * time.Second), Status: dispatch.StatusError, Err: timedOut},
				{StartedAt: at.Add(3 * time.Second), FinishedAt: at.Add(3*time.Second + 1), Status: dispatch.StatusOK},
				{StartedAt: at.In(time.FixedZone("x", 3600)), FinishedAt: at, Status: dispatch.StatusCancelled, Err: &dispatch.Error{Code: "cancelled"}},
				{Status: dispatch.StatusPending},
				{Status: dispatch.StatusError},
			}
			code, _ := repairString(s)
			if code == "" {
				code = "error"
			}
			outcomes := []string{code, "timed_out", "ok", "cancelled", "pending", "error"}
			tried := triedDataJSON{answeredDataJSON: want}
			for k, tr := range tries {
				tried.AttemptTimes = append(tried.AttemptTimes, tryJSON{FinishedAt: tr.FinishedAt.UTC(), Outcome: outcomes[k], StartedAt: tr.StartedAt.UTC()})
			}
			same("answered after retries", answeredData(res, &answerTimes{tries: tries}), tried)
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
			same("received", receivedLine(tu, time.Now(), false).Data, want)
			want.Streamed = true
			same("received streamed", receivedLine(tu, time.Now(), true).Data, want)
		}
	}
}

// TestWithWaits: the times of a keyed call go in key order among the
// fields answeredData writes, whatever those are.
func TestWithWaits(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 10, 0, 0, 5000, time.UTC)
	for _, res := range []Result{
		{Attempts: 1, Status: CallOK},
		{Attempts: 2, Status: CallFailed, Error: &CallError{Code: `a","status":"x`, Message: `{"output_id":"}`}},
		{Attempts: 1, Status: CallOK, Truncated: true, OriginalBytes: 9, OriginalLines: 1, OutputID: "out_1", Repaired: 2},
	} {
		for _, times := range [][3]time.Time{{at, at, at}, {at, {}, {}}, {at, at, {}}} {
			got := answeredData(res, &answerTimes{admitted: times[0], ready: times[1], gated: times[2]})
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			want := map[string]any{}
			_ = json.Unmarshal(answeredData(res, nil), &want)
			for i, k := range []string{"admitted_at", "ready_at", "gated_at"} {
				if !times[i].IsZero() {
					want[k] = times[i].Format(time.RFC3339Nano)
				}
			}
			wantJSON, _ := json.Marshal(want) // json.Marshal sorts keys
			if string(got) != string(wantJSON) {
				t.Errorf("got  %s\nwant %s", got, wantJSON)
			}
		}
	}
}

// deliveredOutputs are outputs, then each awkward string as a JSON
// string: the delivered outputs of the tests below.
func deliveredOutputs(t *testing.T, outputs ...string) []string {
	t.Helper()
	for _, o := range awkward {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(b))
	}
	return outputs
}

// TestDeliveredDataAsMarshalled: a delivery's kept payload and its
// call_answered data, written by hand when they can be, are the bytes
// json.Marshal wrote from their maps before.
func TestDeliveredDataAsMarshalled(t *testing.T) {
	t.Parallel()
	outputs := deliveredOutputs(t, `1`, `{"n":7}`, `"x"`, `null`, `[1,{"a":[]}]`, `{"a": 1}`, "{\"a\":\n1}", `"<a&b>"`,
		`"\u2028"`, "\"\u2028\"", `"é😀"`, `"€"`, `{"b":1,"a":2}`, `"a\\u0041"`, `-1.5e+10`)
	for _, o := range outputs {
		got := deliveryPayload(Delivery{Output: json.RawMessage(o)})
		want, err := json.Marshal(map[string]any{"output": json.RawMessage(o)})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("payload of output %q: %s, json.Marshal wrote %s", o, got, want)
		}
	}
	e := &CallError{Code: "denied", Message: "<no>"}
	if got, want := deliveryPayload(Delivery{Error: e}), mustJSON(map[string]any{"error": e}); string(got) != string(want) {
		t.Errorf("payload of an error: %s, want %s", got, want)
	}
	for _, fp := range append([]string{"0a1b2c3d"}, awkward...) {
		for _, res := range []Result{{Status: CallOK}, {Status: CallOK, Truncated: true}, {Status: CallFailed, Error: e}, {Status: CallStatus(fp)}} {
			got := answeredByKey(res, fp)
			want, err := json.Marshal(map[string]any{"status": res.Status, "completed_by": "key", "key": fp,
				"truncated": res.Truncated, "error": res.Error})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("call_answered data of %+v, key %q: %s, json.Marshal wrote %s", res, fp, got, want)
			}
		}
	}
}

// TestPayloadHashAsMarshalled: a delivery's payload hash, computed without
// json.Marshal when it can be, hashes the bytes json.Marshal wrote: hashes
// kept by an earlier release still tell a repeat from a conflict.
func TestPayloadHashAsMarshalled(t *testing.T) {
	t.Parallel()
	outputs := deliveredOutputs(t, `1`, `{"n":7}`, `{"b":1,"a":2}`, `{"a": [1, 2]}`, `"<a&b>"`, "\"\u2028\"", `"é"`, `"€"`, `1.0`, `1e2`, `"\u00e9"`)
	for _, o := range outputs {
		b, err := json.Marshal(struct {
			Output json.RawMessage `json:"output,omitempty"`
		}{canonicalJSON(json.RawMessage(o))})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := payloadHash(Delivery{Output: json.RawMessage(o)}), sha256.Sum256(b); got != want {
			t.Errorf("hash of output %s: %x, want the hash of %s, %x", o, got, b, want)
		}
	}
}
