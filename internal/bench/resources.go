package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The resources workload (`turnd bench --resources`): turns of Writes
// writes that each take Latency, on as many different resources, against
// the same turns on one resource, posted one at a time and alternating by
// round, so that each latency is a turn's own. Different resources run at
// once; one resource runs its writes in call order.

// ResourcesConfig is a `turnd bench --resources` run.
type ResourcesConfig struct {
	// Config gives the target (URL, Token, or a started turnd on Store,
	// DatabaseURL, ServerBinary), ToolAddr, Label and JSON.
	Config
	// Writes is the number of writes a turn; Latency how long each takes.
	// Defaults 8 and 20ms.
	Writes  int
	Latency time.Duration
	// Turns is the number of turns of each kind a round, Rounds the
	// rounds. Defaults 10 and 3.
	Turns, Rounds int
}

// ResourcesReport is what a resources run measured: the median turn
// latency, in seconds, with every write on its own resource and with all
// on one, and their ratio (different / same).
type ResourcesReport struct {
	Label     string  `json:"label,omitempty"`
	Store     string  `json:"store"`
	Writes    int     `json:"writes"`
	LatencyS  float64 `json:"write_latency_s"`
	Turns     int     `json:"turns_each"`
	Different float64 `json:"different_median_s"`
	Same      float64 `json:"same_median_s"`
	Ratio     float64 `json:"ratio"`
}

func (c ResourcesConfig) withDefaults() ResourcesConfig {
	if c.Writes <= 0 {
		c.Writes = 8
	}
	if c.Latency <= 0 {
		c.Latency = 20 * time.Millisecond
	}
	if c.Turns <= 0 {
		c.Turns = 10
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	return c
}

// ExecuteResources runs the resources workload and prints its report.
func ExecuteResources(ctx context.Context, c ResourcesConfig, stdout, stderr io.Writer) (ResourcesReport, error) {
	c = c.withDefaults()
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	rep := ResourcesReport{Label: c.Label, Writes: c.Writes, LatencyS: c.Latency.Seconds()}
	target, store, stop, err := startTarget(ctx, c.Config, logf)
	if err != nil {
		return rep, err
	}
	defer stop()
	rep.Store = store

	rb := &resourceBench{base: strings.TrimRight(target.URL, "/"), token: target.Token,
		session: "bench-resources-" + randomID(4), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	defer rb.client.CloseIdleConnections()
	if _, err := rb.turn(ctx, "warm", false, 1, 0); err != nil {
		return rep, fmt.Errorf("warming up: %w", err)
	}
	var different, same []time.Duration
	for round := range c.Rounds {
		for _, one := range []bool{false, true} {
			logf("round %d/%d: %d turns of %d writes of %s on %s", round+1, c.Rounds, c.Turns, c.Writes, c.Latency,
				map[bool]string{false: "different resources", true: "one resource"}[one])
			for i := range c.Turns {
				took, err := rb.turn(ctx, fmt.Sprintf("r%d-%v-%d", round, one, i), one, c.Writes, c.Latency)
				if err != nil {
					return rep, err
				}
				if one {
					same = append(same, took)
				} else {
					different = append(different, took)
				}
			}
		}
	}
	rep.Turns = len(different)
	rep.Different, rep.Same = median(different).Seconds(), median(same).Seconds()
	rep.Ratio = rep.Different / rep.Same
	return rep, writeResources(stdout, c, rep)
}

func writeResources(w io.Writer, c ResourcesConfig, rep ResourcesReport) error {
	if c.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	_, err := fmt.Fprintf(w, "resources (%s): turns of %d writes of %s, %d of each kind, posted one at a time\n"+
		"  different resources: p50 %.3f s\n  one resource:        p50 %.3f s\n  ratio (different / one): %.3f\n",
		rep.Store, rep.Writes, c.Latency, rep.Turns, rep.Different, rep.Same, rep.Ratio)
	return err
}

type resourceBench struct {
	base, token, session string
	client               *http.Client
}

// turn posts one turn of n keyed writes of latency each (all on one
// resource when one is set) and returns how long its answer took.
func (rb *resourceBench) turn(ctx context.Context, id string, one bool, n int, latency time.Duration) (time.Duration, error) {
	type call struct {
		ID        string         `json:"id"`
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	calls := make([]call, n)
	for i := range calls {
		res := fmt.Sprintf("res-%d", i)
		if one {
			res = "res"
		}
		calls[i] = call{ID: fmt.Sprintf("%s-w%d", id, i), Name: ToolWriteKeyed, // call ids answered in the session are replayed
			Arguments: map[string]any{"resource": res, "latency_us": latency.Microseconds()}}
	}
	body, _ := json.Marshal(map[string]any{"id": id, "calls": calls})
	req, err := http.NewRequestWithContext(ctx, "POST", rb.base+"/v1/sessions/"+rb.session+"/turns", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if rb.token != "" {
		req.Header.Set("Authorization", "Bearer "+rb.token)
	}
	start := time.Now()
	resp, err := rb.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("posting turn %s: %w", id, err)
	}
	defer resp.Body.Close()
	var out struct {
		Status  string `json:"status"`
		Results []struct {
			Status string `json:"status"`
		} `json:"results"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	took := time.Since(start)
	switch {
	case err != nil:
		return 0, fmt.Errorf("turn %s: decoding the answer (%s): %w", id, resp.Status, err)
	case resp.StatusCode != http.StatusOK || out.Status != "completed" || len(out.Results) != n:
		return 0, fmt.Errorf("turn %s: %s, status %q, %d results", id, resp.Status, out.Status, len(out.Results))
	}
	for i, r := range out.Results {
		if r.Status != "ok" {
			return 0, fmt.Errorf("turn %s: call w%d %s", id, i, r.Status)
		}
	}
	return took, nil
}
