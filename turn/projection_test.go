package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// sized is a read tool whose output is {"n": bytes} lines of text. Each
// call waits for the call before it in order (the call ids, in the order
// given) to finish, so a test chooses the completion order.
func sized(name string, order []string) *tool.Spec {
	done := make(map[string]chan struct{}, len(order))
	for _, id := range order {
		done[id] = make(chan struct{})
	}
	return &tool.Spec{Name: name, Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		var args struct{ N int }
		_ = json.Unmarshal(c.Arguments, &args)
		for i, id := range order {
			if id != c.ID {
				continue
			}
			if i > 0 {
				select {
				case <-done[order[i-1]]:
				case <-ctx.Done():
				}
			}
			defer close(done[id])
		}
		line := "output line of the tool\n"
		return dispatch.OK([]byte(strings.Repeat(line, args.N/len(line)+1)[:args.N]), false)
	})}
}

// TestTurnBudgetIndependentOfCompletionOrder: a turn's outputs share its
// turn_limit identically whichever order its calls complete in, and the
// ledger says so byte for byte.
func TestTurnBudgetIndependentOfCompletionOrder(t *testing.T) {
	t.Parallel()
	sizes := map[string]int{"c1": 50, "c2": 3000, "c3": 3000, "c4": 30}
	var reqCalls []turn.Call
	for _, id := range []string{"c1", "c2", "c3", "c4"} {
		reqCalls = append(reqCalls, turn.Call{ID: id, Name: "sized", Arguments: json.RawMessage(`{"n":` + strconv.Itoa(sizes[id]) + `}`)})
	}
	run := func(order []string, streamed bool) (turn.Turn, []string) {
		f := newFixture(t, sized("sized", order))
		b := budget.Config{Limit: 4096, MaxLines: 10000, TurnLimit: 1000}
		if _, err := f.svc.CreateSession(context.Background(), turn.SessionSpec{ID: "s", Budget: &b}); err != nil {
			t.Fatal(err)
		}
		var tr turn.Turn
		if streamed {
			// The calls arrive one by one and their reads start early.
			tr = streamAwait(t, f.svc, "s", "t", reqCalls)
		} else {
			tr = f.run(f.svc, "s", turn.TurnRequest{ID: "t", Calls: reqCalls})
		}
		lines, err := f.store.Ledger(context.Background(), "s", 0, 100, turn.MaxPageBytes)
		if err != nil {
			t.Fatal(err)
		}
		var answered []string
		for _, l := range lines {
			if l.Kind == turn.LineCallAnswered {
				// Output ids are random; the rest must match.
				data := outputIDs.ReplaceAllString(string(l.Data), `"output_id":"…"`)
				answered = append(answered, l.CallID+" "+data)
			}
		}
		return tr, answered
	}
	forward, fl := run([]string{"c1", "c2", "c3", "c4"}, false)
	backward, bl := run([]string{"c4", "c3", "c2", "c1"}, false)
	streamed, sl := run([]string{"c4", "c2", "c1", "c3"}, true)
	for i, r := range forward.Results {
		if string(r.Output) != string(streamed.Results[i].Output) {
			t.Errorf("%s: a streamed turn's output differs:\n%.200s\n%.200s", r.CallID, r.Output, streamed.Results[i].Output)
		}
	}
	if strings.Join(fl, "\n") != strings.Join(sl, "\n") {
		t.Errorf("a streamed turn's ledger differs:\n%s\n---\n%s", strings.Join(fl, "\n"), strings.Join(sl, "\n"))
	}
	total := 0
	for i, r := range forward.Results {
		b := backward.Results[i]
		if string(r.Output) != string(b.Output) || r.Truncated != b.Truncated {
			t.Errorf("%s: output differs with the completion order:\n%.200s\n%.200s", r.CallID, r.Output, b.Output)
		}
		var text string
		if err := json.Unmarshal(r.Output, &text); err != nil {
			t.Fatal(err)
		}
		total += len(text) - len(markerLine(text))
	}
	if strings.Join(fl, "\n") != strings.Join(bl, "\n") {
		t.Errorf("ledgers differ:\n%s\n---\n%s", strings.Join(fl, "\n"), strings.Join(bl, "\n"))
	}
	if got := statuses(forward); got != "c1=ok c2=ok c3=ok c4=ok" {
		t.Fatalf("statuses %s", got)
	}
	if forward.Results[0].Truncated || !forward.Results[1].Truncated || !forward.Results[2].Truncated || forward.Results[3].Truncated {
		t.Errorf("small outputs must pass whole, large ones be cut: %+v", forward.Results)
	}
	if total > 1000 {
		t.Errorf("the turn kept %d bytes, turn_limit 1000", total)
	}
	// c2 may keep floor(950/3) = 316 bytes, c3 floor((950-kept2)/2).
	if !strings.Contains(fl[1], `"limit":316,"window":"head_tail"`) {
		t.Errorf("c2's line does not record its share: %s", fl[1])
	}
}

var outputIDs = regexp.MustCompile(`"output_id":"[^"]*"`)

// markerLine returns the marker line of a projected text ("" if none).
func markerLine(text string) string {
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(l, "...") && strings.HasSuffix(strings.TrimSuffix(l, "\n"), " truncated...") {
			return l
		}
	}
	return ""
}

// goTestLog is a go test -v log of n tests, one of which fails.
func goTestLog(n, failing int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "=== RUN   TestCase%05d\n", i)
		if i == failing {
			fmt.Fprintf(&b, "    case_test.go:42: got 3, want 4\n--- FAIL: TestCase%05d (0.00s)\n", i)
			continue
		}
		fmt.Fprintf(&b, "--- PASS: TestCase%05d (0.00s)\n", i)
	}
	b.WriteString("FAIL\nexit status 1\n")
	return []byte(b.String())
}

// TestErrorsWindow: a session's errors window, or a tool's own, keeps the
// failing test of a long log, and the ledger records the windows kept.
func TestErrorsWindow(t *testing.T) {
	t.Parallel()
	log := goTestLog(5000, 3100)
	impl := dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
		return dispatch.OK(log, false)
	})
	tests := []struct {
		name    string
		session budget.Window
		tool    budget.Projection
		kept    bool
	}{
		{"session errors", budget.WindowErrors, budget.Projection{}, true},
		{"tool errors", "", budget.Projection{Window: budget.WindowErrors, Patterns: []string{"--- FAIL"}}, true},
		{"tool overrides session", budget.WindowErrors, budget.Projection{Window: budget.WindowHeadTail}, false},
		{"default head_tail", "", budget.Projection{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, &tool.Spec{Name: "go_test", Effect: dispatch.EffectRead, Impl: impl, Projection: tt.tool})
			b := budget.Config{Window: tt.session}
			if _, err := f.svc.CreateSession(context.Background(), turn.SessionSpec{ID: "s", Budget: &b}); err != nil {
				t.Fatal(err)
			}
			tr := f.run(f.svc, "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "c", Name: "go_test"}}})
			r := tr.Results[0]
			var text string
			if err := json.Unmarshal(r.Output, &text); err != nil || !r.Truncated {
				t.Fatalf("result %+v: %v", r, err)
			}
			if got := strings.Contains(text, "\n--- FAIL: TestCase03100 (0.00s)\n"); got != tt.kept {
				t.Fatalf("FAIL line kept: %v, want %v", got, tt.kept)
			}
			if len(text) > 16384+64 {
				t.Fatalf("projection of %d bytes", len(text))
			}
			lines, err := f.store.Ledger(context.Background(), "s", 0, 100, turn.MaxPageBytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				if l.Kind != turn.LineCallAnswered {
					continue
				}
				if noted := strings.Contains(string(l.Data), `"window":"errors"}`); noted != tt.kept {
					t.Fatalf("call_answered %s: projection recorded %v, want %v", l.Data, noted, tt.kept)
				}
			}
		})
	}
}

// TestTurnBudgetStreamedOutput: an output a tool projected while it
// streamed in (tool.Projected) is cut to its share of the turn budget just
// as an output given whole.
func TestTurnBudgetStreamedOutput(t *testing.T) {
	t.Parallel()
	data := []byte(strings.Repeat("streamed line of output\n", 200))
	whole := dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
		return dispatch.OK(data, false)
	})
	streamed := dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		p, _, ok := tool.ProjectorFrom(ctx)
		if !ok {
			return dispatch.Fail("no_projector", "no projector in the context")
		}
		s := p.NewStream()
		for rest := data; len(rest) > 0; rest = rest[min(len(rest), 100):] {
			s.Write(rest[:min(len(rest), 100)])
		}
		out := dispatch.OK(nil, false)
		out.Detail = &tool.Projected{Result: s.Result(), Full: data, Complete: true, Stream: s}
		return out
	})
	outputs := map[string]string{}
	for name, impl := range map[string]dispatch.Tool{"whole": whole, "streamed": streamed} {
		f := newFixture(t, &tool.Spec{Name: "big", Effect: dispatch.EffectRead, Impl: impl})
		b := budget.Config{TurnLimit: 900, Window: budget.WindowErrors}
		if _, err := f.svc.CreateSession(context.Background(), turn.SessionSpec{ID: "s", Budget: &b}); err != nil {
			t.Fatal(err)
		}
		tr := f.run(f.svc, "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "a", Name: "big"}, {ID: "b", Name: "big"}, {ID: "c", Name: "big"}}})
		for _, r := range tr.Results {
			outputs[name] += string(r.Output) + "\n"
		}
	}
	if outputs["whole"] != outputs["streamed"] {
		t.Fatalf("streamed outputs differ from whole ones:\n%s\n---\n%s", outputs["streamed"], outputs["whole"])
	}
	if n := strings.Count(outputs["whole"], "truncated..."); n != 3 {
		t.Fatalf("%d of 3 outputs cut to their share:\n%s", n, outputs["whole"])
	}
}
