package dispatch_test

import (
	"context"
	"slices"
	"testing"

	"github.com/turnd/turnd/dispatch"
)

func TestMetaToolResolvesBeforeAdmission(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, args, wantArgs string
	}{
		{"with arguments", `{"name": "lookup", "arguments": {"q": 1}}`, `{"q": 1}`},
		{"without arguments", `{"name": "lookup"}`, `{}`},
		{"null arguments", `{"name": "lookup", "arguments": null}`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got dispatch.Call
			h := newHost().register("lookup", dispatch.EffectRead, dispatch.ToolFunc(
				func(_ context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
					got = call
					return dispatch.OK(nil, false)
				}))
			w := dispatch.Wave{Calls: []dispatch.Call{{ID: "m1", Name: dispatch.MetaTool, Arguments: []byte(tc.args)}}}
			if _, err := w.Run(t.Context(), h); err != nil {
				t.Fatal(err)
			}
			if got.ID != "m1" || got.Name != "lookup" || string(got.Arguments) != tc.wantArgs {
				t.Errorf("tool got %+v", got)
			}
			a := h.accountedCalls()[0]
			if !a.Resolved || a.Call.Name != "lookup" || a.Outcome.Status != dispatch.StatusOK {
				t.Errorf("accounted %+v", a)
			}
			if ids := h.admittedIDs(); !slices.Equal(ids, []string{"m1"}) {
				t.Errorf("admitted %q", ids)
			}
		})
	}
}

func TestMalformedMetaCallIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, args string }{
		{"empty", ``},
		{"not json", `{name`},
		{"array", `[]`},
		{"null", `null`},
		{"no name", `{"arguments": {}}`},
		{"name not a string", `{"name": 5}`},
		{"empty name", `{"name": ""}`},
		{"calls itself", `{"name": "call", "arguments": {}}`},
		{"arguments not an object", `{"name": "lookup", "arguments": [1]}`},
		{"arguments a string", `{"name": "lookup", "arguments": "q"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost().register("lookup", dispatch.EffectRead, okTool("x"))
			w := dispatch.Wave{Calls: []dispatch.Call{
				{ID: "m1", Name: dispatch.MetaTool, Arguments: []byte(tc.args)},
				{ID: "m2", Name: "lookup"},
			}}
			if _, err := w.Run(t.Context(), h); err != nil {
				t.Fatal(err)
			}
			as := h.accountedCalls()
			if got := statuses(as); !slices.Equal(got, []string{"m1=refused/invalid_arguments", "m2=ok"}) {
				t.Errorf("accounted %q", got)
			}
			if as[0].Admitted || as[0].Verdict != dispatch.Refuse {
				t.Errorf("malformed meta-call accounted as %+v", as[0])
			}
			if ids := h.admittedIDs(); !slices.Equal(ids, []string{"m2"}) {
				t.Errorf("host admitted %q", ids)
			}
		})
	}
}
