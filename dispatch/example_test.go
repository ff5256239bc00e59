package dispatch_test

import (
	"context"
	"fmt"

	"github.com/turnd/turnd/dispatch"
)

// registry is a minimal Host: it admits every call whose tool it knows and
// prints each call as it is accounted.
type registry map[string]struct {
	tool   dispatch.Tool
	effect dispatch.Effect
}

func (r registry) Admit(_ context.Context, call dispatch.Call) dispatch.Admission {
	t, ok := r[call.Name]
	if !ok {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("unknown_tool", call.Name)}
	}
	return dispatch.Admission{Verdict: dispatch.Run, Tool: t.tool, Effect: t.effect}
}

func (r registry) Account(_ context.Context, a dispatch.Accounted) error {
	fmt.Printf("%d %s %s (%s): %s\n", a.Index, a.Call.ID, a.Call.Name, a.Effect, a.Outcome.Output)
	return nil
}

// Two reads run concurrently and the write runs after both are accounted;
// whichever read finishes first, the host accounts the calls in call order.
func ExampleWave_Run() {
	echo := func(answer string) dispatch.Tool {
		return dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
			return dispatch.OK([]byte(answer), false)
		})
	}
	host := registry{
		"weather":  {echo("sunny"), dispatch.EffectRead},
		"calendar": {echo("free at 3pm"), dispatch.EffectRead},
		"invite":   {echo("invited"), dispatch.EffectWrite},
	}
	wave := dispatch.Wave{Calls: []dispatch.Call{
		{ID: "call_1", Name: "weather", Arguments: []byte(`{"city":"Lisbon"}`)},
		{ID: "call_2", Name: "calendar", Arguments: []byte(`{}`)},
		{ID: "call_3", Name: "invite", Arguments: []byte(`{"at":"15:00"}`)},
	}}
	report, err := wave.Run(context.Background(), host)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d calls, %d ok\n", report.Calls, report.OK)
	// Output:
	// 0 call_1 weather (read): sunny
	// 1 call_2 calendar (read): free at 3pm
	// 2 call_3 invite (write): invited
	// 3 calls, 3 ok
}
