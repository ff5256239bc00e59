package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// A tool output no store can hold as it is (invalid UTF-8, NUL, a \u0000
// escape, an unpaired surrogate) is repaired at the tool boundary: the call
// is answered once, with U+FFFD in place of each bad sequence, its ledger
// line says how many were replaced, and the turn settles. Before the repair
// PostgreSQL refused the commit (SQLSTATE 22021/22P05), the turn stayed
// running and every recovery ran the tool again.
func TestPoisonOutputsAreRepaired(t *testing.T) {
	t.Parallel()
	poisons := []struct {
		name     string
		outcome  dispatch.Outcome
		want     string // in the output (or the error message)
		repaired int
	}{
		{"json invalid utf-8", dispatch.OK(json.RawMessage("{\"s\":\"a\xffb\"}"), true), `"a` + "\uFFFD" + `b"`, 1},
		{"json nul escape", dispatch.OK(json.RawMessage(`{"s":"a\u0000b"}`), true), `"a\ufffdb"`, 1},
		{"json lone surrogate", dispatch.OK(json.RawMessage(`{"s":"\ud800x","t":"\ud83d\ude00"}`), true), `"\ufffdx"`, 1},
		{"json invalid utf-8 in a key", dispatch.OK(json.RawMessage("{\"k\xc3\":1}"), true), "\"k\uFFFD\"", 1},
		{"text invalid utf-8 and nul", dispatch.OK([]byte("a\xff\x00b\xe2\x82"), false), "a\uFFFD\uFFFDb\uFFFD\uFFFD", 4},
		{"error message with nul and invalid utf-8", dispatch.Fail("boom\x00", "bad \xc0 byte"), "bad \uFFFD byte", 2},
	}
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		f := &fixture{t: t, store: open(t)}
		var specs []*tool.Spec
		for i, p := range poisons {
			outcome := p.outcome
			fn := func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome { return outcome }
			specs = append(specs,
				f.counted(fmt.Sprintf("read%d", i), dispatch.EffectRead, fn),
				f.counted(fmt.Sprintf("write%d", i), dispatch.EffectWrite, fn))
		}
		f.reg = mustRegistry(t, specs...)
		f.svc = f.service("owner-a", nil)
		for i, p := range poisons {
			for _, effect := range []string{"read", "write"} {
				name := fmt.Sprintf("%s%d", effect, i)
				t.Run(p.name+"/"+effect, func(t *testing.T) {
					session := "s-" + name
					got := submitAwait(t, f.svc, session, turn.TurnRequest{ID: "t1", Calls: []turn.Call{{ID: "c1", Name: name, Arguments: json.RawMessage(`{}`)}}})
					if got.Status != turn.StatusCompleted && got.Status != turn.StatusFailed {
						t.Fatalf("turn %s, want settled", got.Status)
					}
					if n := f.count(name); n != 1 {
						t.Errorf("tool ran %d times, want once", n)
					}
					res := got.Results[0]
					if res.Status == turn.CallFailed && res.Error.Code == turn.CodeInterrupted {
						t.Fatalf("result interrupted: %+v", res.Error)
					}
					text := string(res.Output)
					if res.Error != nil {
						text = res.Error.Code + " " + res.Error.Message
					}
					if !strings.Contains(text, p.want) || !utf8.ValidString(text) || strings.ContainsRune(text, 0) || strings.Contains(text, `\u0000`) {
						t.Errorf("answer %q, want it to contain %q, valid UTF-8 without NUL", text, p.want)
					}
					// What was answered is what the store holds.
					stored, err := f.store.GetTurn(context.Background(), turn.TurnKey{SessionID: session, TurnID: "t1"})
					if err != nil {
						t.Fatal(err)
					}
					if s := stored.Results[0]; string(s.Output) != string(res.Output) || fmt.Sprint(s.Error) != fmt.Sprint(res.Error) {
						t.Errorf("stored %s %v, answered %s %v", s.Output, s.Error, res.Output, res.Error)
					}
					lines, err := f.store.Ledger(context.Background(), session, 0, 100, turn.MaxPageBytes)
					if err != nil {
						t.Fatal(err)
					}
					var answered string
					for _, l := range lines {
						if l.Kind == turn.LineCallAnswered {
							answered = string(l.Data)
						}
					}
					if want := fmt.Sprintf(`"output_repaired":%d`, p.repaired); !strings.Contains(answered, want) {
						t.Errorf("call_answered %s, want %s", answered, want)
					}
				})
			}
		}
	})
}

// submitAwait submits req and waits for the turn to settle or wait.
func submitAwait(t *testing.T, svc *turn.Service, session string, req turn.TurnRequest) turn.Turn {
	t.Helper()
	sub, err := svc.Submit(context.Background(), session, req)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if sub.Replayed {
		return sub.Turn
	}
	got, err := svc.Await(context.Background(), turn.TurnKey{SessionID: session, TurnID: sub.Turn.ID})
	if err != nil {
		t.Fatalf("await: %v", err)
	}
	return got
}
