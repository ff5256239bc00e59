package sqlstore

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/turn"
)

func TestCallsKeepArgumentsVerbatim(t *testing.T) {
	t.Parallel()
	calls := []turn.Call{
		{ID: "c<1>", Name: "search", Arguments: json.RawMessage("{ \"q\" : \"a < b & c\",\n \"n\": 1.0 }")},
		{ID: "c2", Name: "ls"},
	}
	b, err := Calls(calls)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCalls(b)
	if err != nil {
		t.Fatalf("DecodeCalls(%s): %v", b, err)
	}
	if !reflect.DeepEqual(got, calls) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, calls)
	}
	if _, err := Calls([]turn.Call{{ID: "x", Arguments: json.RawMessage(`{"open":`)}}); err == nil {
		t.Error("Calls accepted invalid arguments")
	}
}

func TestTools(t *testing.T) {
	t.Parallel()
	for _, tools := range [][]string{nil, {}, {"a", "b"}} {
		b, err := Tools(tools)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeTools(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tools) {
			t.Errorf("Tools round trip of %#v = %#v", tools, got)
		}
	}
}

func TestResultsLastWins(t *testing.T) {
	t.Parallel()
	rs := []turn.Result{{Index: 1, Status: turn.CallStarted}, {Index: 0}, {Index: 1, Status: turn.CallOK}}
	got := Results(rs)
	want := []turn.Result{{Index: 0}, {Index: 1, Status: turn.CallOK}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Results = %+v, want %+v", got, want)
	}
}

func TestCheckCommit(t *testing.T) {
	t.Parallel()
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	tests := []struct {
		name     string
		c        turn.Commit
		mismatch bool
		ok       bool
	}{
		{"empty ids filled later", turn.Commit{Key: k, Lines: []turn.Line{{}}, Outputs: []turn.Output{{ID: "o"}}}, false, true},
		{"line of another session", turn.Commit{Key: k, Lines: []turn.Line{{SessionID: "x"}}}, true, false},
		{"line of another turn", turn.Commit{Key: k, Lines: []turn.Line{{TurnID: "t"}, {TurnID: "x"}}}, true, false},
		{"output of another session", turn.Commit{Key: k, Outputs: []turn.Output{{ID: "o", SessionID: "x"}}}, true, false},
		{"output without id", turn.Commit{Key: k, Outputs: []turn.Output{{}}}, false, false},
		{"no key", turn.Commit{}, false, false},
	}
	for _, tt := range tests {
		err := CheckCommit(tt.c)
		if (err == nil) != tt.ok || errors.Is(err, ErrKeyMismatch) != tt.mismatch {
			t.Errorf("%s: CheckCommit = %v", tt.name, err)
		}
	}
	if got := LineTurn(turn.Line{}, k); got != "t" {
		t.Errorf("LineTurn of an empty id = %q", got)
	}
	if got := LineTurn(turn.Line{TurnID: "u"}, k); got != "u" {
		t.Errorf("LineTurn = %q", got)
	}
}

func TestCheckReceiveFillsIDs(t *testing.T) {
	t.Parallel()
	r := turn.Receive{Turn: turn.Turn{SessionID: "s", ID: "t"}}
	if err := CheckReceive(&r); err != nil {
		t.Fatal(err)
	}
	if r.Session.ID != "s" || r.Line.SessionID != "s" || r.Line.TurnID != "t" {
		t.Errorf("ids not filled: %+v", r)
	}
	r = turn.Receive{Session: turn.Session{ID: "other"}, Turn: turn.Turn{SessionID: "s", ID: "t"}}
	if err := CheckReceive(&r); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("CheckReceive of a mismatched session = %v", err)
	}
}

func TestRawJSON(t *testing.T) {
	t.Parallel()
	if b, err := RawJSON("x", json.RawMessage{}); err != nil || b != nil {
		t.Errorf("RawJSON(empty) = %q, %v; want nil, nil", b, err)
	}
	if b, err := RawJSON("x", json.RawMessage(` [1, 2] `)); err != nil || string(b) != ` [1, 2] ` {
		t.Errorf("RawJSON changed its input: %q, %v", b, err)
	}
	if _, err := RawJSON("x", json.RawMessage(`{`)); err == nil {
		t.Error("RawJSON accepted invalid JSON")
	}
}

func TestInOrder(t *testing.T) {
	t.Parallel()
	a, b, c := turn.TurnKey{SessionID: "s", TurnID: "a"}, turn.TurnKey{SessionID: "s", TurnID: "b"}, turn.TurnKey{SessionID: "s", TurnID: "c"}
	tests := []struct {
		keys, found, want []turn.TurnKey
	}{
		{nil, nil, []turn.TurnKey{}},
		{[]turn.TurnKey{a, b, c}, []turn.TurnKey{c, a}, []turn.TurnKey{a, c}},
		{[]turn.TurnKey{a, b, a}, []turn.TurnKey{a, a}, []turn.TurnKey{a}},
		{[]turn.TurnKey{a}, []turn.TurnKey{b}, []turn.TurnKey{}},
	}
	for _, tt := range tests {
		if got := InOrder(tt.keys, tt.found); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("InOrder(%v, %v) = %v, want %v", tt.keys, tt.found, got, tt.want)
		}
	}
}

// A session's columns, as SessionColumns encodes them, decode back to the
// session; tools nil (every tool) stays distinct from none.
func TestSessionRowRoundTrip(t *testing.T) {
	t.Parallel()
	created := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	for _, sess := range []turn.Session{
		{ID: "s1", CallbackURL: "http://cb", Metadata: json.RawMessage(`{"a": 1}`), Budget: budget.Config{Limit: 10, MaxLines: 3}, CreatedAt: created},
		{ID: "s2", Tools: []string{}, CreatedAt: created},
		{ID: "s3", Tools: []string{"ls", "cat"}, CreatedAt: created},
	} {
		c, err := SessionColumns(sess)
		if err != nil {
			t.Fatal(err)
		}
		row := SessionRow{Tools: c.Tools, Budget: c.Budget, Metadata: c.Metadata, CallbackURL: sess.CallbackURL}
		got, err := row.Session(sess.ID, created)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, sess) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, sess)
		}
	}
	if _, err := (&SessionRow{Budget: []byte(`[`)}).Session("s", created); err == nil {
		t.Error("a corrupt budget decoded")
	}
}

func TestReceiveColumnsLine(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := turn.Receive{Turn: turn.Turn{SessionID: "s", ID: "t"}, Line: turn.Line{Kind: turn.LineTurnReceived, At: at, Data: json.RawMessage(`{"n":1}`)}}
	rc, err := ReceiveColumns(&r)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := DecodeLines(nil, "s", 7, rc.Line, 0, 10)
	if err != nil || len(lines) != 1 {
		t.Fatalf("the line batch %s decodes to %v, %v", rc.Line, lines, err)
	}
	want := turn.Line{Seq: 7, SessionID: "s", TurnID: "t", Kind: turn.LineTurnReceived, At: at, Data: json.RawMessage(`{"n":1}`)}
	if !reflect.DeepEqual(lines[0], want) {
		t.Errorf("line = %+v, want %+v", lines[0], want)
	}
	r.Line.Data = json.RawMessage(`{`)
	if _, err := ReceiveColumns(&r); err == nil {
		t.Error("invalid line data accepted")
	}
}

func TestTurnExists(t *testing.T) {
	t.Parallel()
	recorded := turn.Turn{SessionID: "s", ID: "t", Status: turn.StatusCompleted}
	res, err := TurnExists("receiving turn s/t", func() (turn.Turn, error) { return recorded, nil })
	if !errors.Is(err, turn.ErrTurnExists) || !reflect.DeepEqual(res.Existing, recorded) {
		t.Errorf("TurnExists = %+v, %v", res, err)
	}
	gone := errors.New("read failed")
	res, err = TurnExists("receiving turn s/t", func() (turn.Turn, error) { return turn.Turn{}, gone })
	if !errors.Is(err, gone) || errors.Is(err, turn.ErrTurnExists) || res.Existing.ID != "" {
		t.Errorf("TurnExists of an unreadable turn = %+v, %v", res, err)
	}
}
