package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/turnd/turnd/internal/streamfix"
)

// The streamed workload (`turnd bench --streamed`): stream-end → answer of
// the reference fixture streamed against posted whole, and workload 1's
// rate streamed as NDJSON against posted whole, in one run. The fixture and
// its pacing are described in ARCHITECTURE.md.

// StreamedConfig is a `turnd bench --streamed` run.
type StreamedConfig struct {
	// Config gives the target (URL, Token, or a started turnd on Store,
	// DatabaseURL, ServerBinary), ToolAddr, Label and JSON.
	Config
	// Formats are the stream formats of the latency fixture: openai.chat,
	// openai.responses, anthropic.messages, ndjson. Default all four.
	Formats []string
	// Turns is the number of fixture turns per format. Default 12.
	Turns int
	// Parallel is how many fixture turns run at once. Default 4.
	Parallel int
	// Slice is the length of each slice of workload 1, whole or streamed;
	// Rounds how many of each (alternating). Defaults 5s and 2.
	Slice  time.Duration
	Rounds int
	// Concurrency and Calls shape workload 1. Defaults 32 and 4.
	Concurrency, Calls int
}

// StreamedReport is what a streamed run measured.
type StreamedReport struct {
	Label   string             `json:"label,omitempty"`
	Store   string             `json:"store"`
	Latency []StreamedLatency  `json:"latency"`
	Cost    StreamedCost       `json:"cost"`
	Errors  map[string]int     `json:"errors,omitempty"`
	Fixture map[string]float64 `json:"fixture_seconds"`
}

// StreamedLatency is one format's stream-end → answer medians.
type StreamedLatency struct {
	Format string `json:"format"`
	Turns  int    `json:"turns"`
	// StreamedMedian and WholeMedian are the medians, in seconds, of
	// stream end → answer (streamed) and post → answer (whole, posted at
	// the stream's end); Ratio is StreamedMedian / WholeMedian.
	StreamedMedian float64 `json:"streamed_median_s"`
	WholeMedian    float64 `json:"whole_median_s"`
	Ratio          float64 `json:"ratio"`
}

// StreamedCost compares workload 1 streamed (NDJSON) with it posted whole.
type StreamedCost struct {
	WholeTPS    float64 `json:"whole_turns_per_s"`
	StreamedTPS float64 `json:"streamed_turns_per_s"`
	Ratio       float64 `json:"ratio"`
	WholeErrors int     `json:"whole_errors"`
	StreamErrs  int     `json:"streamed_errors"`
}

// The reference fixture's offsets.
var (
	fixtureCalls = []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond}
	fixtureEnd   = 800 * time.Millisecond
	fixtureTook  = []time.Duration{time.Second, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
	// chatTokenGap is when, after a call's last fragment, the next call's
	// first fragment (which completes it in openai.chat) is written.
	chatTokenGap = 20 * time.Millisecond
)

func (c StreamedConfig) withDefaults() StreamedConfig {
	if len(c.Formats) == 0 {
		c.Formats = []string{"openai.chat", "openai.responses", "anthropic.messages", "ndjson"}
	}
	if c.Turns <= 0 {
		c.Turns = 12
	}
	if c.Parallel <= 0 {
		c.Parallel = 4
	}
	if c.Slice <= 0 {
		c.Slice = 5 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 2
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 32
	}
	if c.Calls <= 0 {
		c.Calls = 4
	}
	return c
}

// ExecuteStreamed runs the streamed workload and prints its report.
func ExecuteStreamed(ctx context.Context, c StreamedConfig, stdout, stderr io.Writer) (StreamedReport, error) {
	c = c.withDefaults()
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	rep := StreamedReport{Label: c.Label, Errors: map[string]int{}, Fixture: map[string]float64{}}
	for i, off := range fixtureCalls {
		rep.Fixture[fmt.Sprintf("call%d_at", i+1)] = off.Seconds()
		rep.Fixture[fmt.Sprintf("call%d_takes", i+1)] = fixtureTook[i].Seconds()
	}
	rep.Fixture["stream_end"] = fixtureEnd.Seconds()
	target, store, stop, err := startTarget(ctx, c.Config, logf)
	if err != nil {
		return rep, err
	}
	defer stop()
	rep.Store = store

	sb := &streamBench{base: strings.TrimRight(target.URL, "/"), token: target.Token, prefix: "bench-stream-" + randomID(4),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}, errs: rep.Errors}
	defer sb.client.CloseIdleConnections()
	for _, format := range c.Formats {
		logf("latency fixture, %s: %d turns, %d at once", format, c.Turns, c.Parallel)
		l, err := sb.latency(ctx, format, c.Turns, c.Parallel)
		if err != nil {
			return rep, err
		}
		rep.Latency = append(rep.Latency, l)
	}

	none, _ := ParseDist("none")
	w := Workload{Concurrency: c.Concurrency, Calls: c.Calls, ReadFraction: 1, Latency: none, DeferredDelay: none,
		Tools: ToolBuiltin, Duration: c.Slice, Wait: 2 * time.Minute, Seed: 1}
	var wholeLoads, streamedLoads []Load
	for round := range c.Rounds {
		for _, s := range []bool{false, true} {
			w.Streamed = s
			logf("workload 1, round %d/%d, %s: %s", round+1, c.Rounds, map[bool]string{false: "posted whole", true: "streamed (NDJSON)"}[s], c.Slice)
			l, err := Run(ctx, target, w, nil, 0)
			if err != nil {
				return rep, fmt.Errorf("workload 1: %w", err)
			}
			if s {
				streamedLoads = append(streamedLoads, l)
			} else {
				wholeLoads = append(wholeLoads, l)
			}
		}
	}
	whole, streamed := combineLoads(wholeLoads), combineLoads(streamedLoads)
	rep.Cost = StreamedCost{
		WholeTPS:    float64(whole.Result.Ops) / whole.Result.Elapsed.Seconds(),
		StreamedTPS: float64(streamed.Result.Ops) / streamed.Result.Elapsed.Seconds(),
		WholeErrors: whole.Result.Errors, StreamErrs: streamed.Result.Errors,
	}
	rep.Cost.Ratio = rep.Cost.StreamedTPS / rep.Cost.WholeTPS
	return rep, writeStreamed(stdout, c, rep)
}

func writeStreamed(w io.Writer, c StreamedConfig, rep StreamedReport) error {
	if c.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "streamed turns (%s)\n", rep.Store)
	fmt.Fprintf(&b, "  fixture: call 1 read 1s at 0s; calls 2-4 reads 50ms at 0.25/0.5/0.75s; stream ends at 0.8s\n")
	fmt.Fprintf(&b, "  %-20s %6s %18s %18s %8s\n", "format", "turns", "streamed p50 (s)", "whole p50 (s)", "ratio")
	for _, l := range rep.Latency {
		fmt.Fprintf(&b, "  %-20s %6d %18.3f %18.3f %8.3f\n", l.Format, l.Turns, l.StreamedMedian, l.WholeMedian, l.Ratio)
	}
	fmt.Fprintf(&b, "  workload 1 (%d clients, %d instant reads a turn): whole %.0f turns/s, streamed (NDJSON) %.0f turns/s, ratio %.3f (errors: %d whole, %d streamed)\n",
		c.Concurrency, c.Calls, rep.Cost.WholeTPS, rep.Cost.StreamedTPS, rep.Cost.Ratio, rep.Cost.WholeErrors, rep.Cost.StreamErrs)
	if len(rep.Errors) > 0 {
		fmt.Fprintf(&b, "  fixture errors: %v\n", rep.Errors)
	}
	_, err := w.Write(b.Bytes())
	return err
}

type streamBench struct {
	base, token, prefix string
	client              *http.Client
	mu                  sync.Mutex
	errs                map[string]int
}

func (sb *streamBench) fail(kind string) {
	sb.mu.Lock()
	sb.errs[kind]++
	sb.mu.Unlock()
}

// latency runs the fixture turns of format and their whole twins.
func (sb *streamBench) latency(ctx context.Context, format string, turns, parallel int) (StreamedLatency, error) {
	sess := sb.prefix + "-" + strings.ReplaceAll(format, ".", "-")
	for _, s := range []string{sess + "-s", sess + "-w"} {
		if _, status, err := sb.post(ctx, "/v1/sessions/"+s+"/turns", "application/json", strings.NewReader(
			`{"id":"warm","calls":[{"id":"warm","name":"`+ToolRead+`","arguments":{"latency_us":0,"bytes":0}}]}`)); err != nil || status != 200 {
			return StreamedLatency{}, fmt.Errorf("warming session %s: %d %v", s, status, err)
		}
	}
	var (
		mu              sync.Mutex
		streamed, whole []time.Duration
	)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range turns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s, w, ok := sb.fixtureTurn(ctx, format, sess, i)
			if ok {
				mu.Lock()
				streamed, whole = append(streamed, s), append(whole, w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(streamed) == 0 {
		return StreamedLatency{}, fmt.Errorf("no fixture turn of %s succeeded: %v", format, sb.errs)
	}
	l := StreamedLatency{Format: format, Turns: len(streamed), StreamedMedian: median(streamed).Seconds(), WholeMedian: median(whole).Seconds()}
	l.Ratio = l.StreamedMedian / l.WholeMedian
	return l, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// fixtureTurn streams fixture turn i in format to session sess-s while
// posting it whole to sess-w at the stream's end; it returns both
// stream-end → answer times.
func (sb *streamBench) fixtureTurn(ctx context.Context, format, sess string, i int) (streamedTook, wholeTook time.Duration, ok bool) {
	calls := make([]streamfix.Call, len(fixtureCalls))
	for k := range calls {
		calls[k] = streamfix.Call{ID: fmt.Sprintf("f%d.c%d", i, k+1), Name: ToolRead,
			Arguments: fmt.Sprintf(`{"latency_us":%d,"bytes":0}`, fixtureTook[k].Microseconds())}
	}
	var fx streamfix.Stream
	path, ct := "/v1/sessions/"+sess+"-s/turns?format="+format, "text/event-stream"
	gap := time.Duration(0)
	switch format {
	case "openai.chat":
		fx, gap = streamfix.Chat(fmt.Sprintf("chatcmpl-f%d", i), calls, "tool_calls"), chatTokenGap
	case "openai.responses":
		fx = streamfix.Responses(fmt.Sprintf("resp_f%d", i), calls, "completed")
	case "anthropic.messages":
		fx = streamfix.Messages(fmt.Sprintf("msg_f%d", i), calls, "tool_use")
	default:
		fx = streamfix.NDJSON(fmt.Sprintf("f%d", i), calls)
		path, ct = "/v1/sessions/"+sess+"-s/turns", "application/x-ndjson"
	}
	wholeBody, _ := json.Marshal(map[string]any{"id": turnIDOf(format, i), "calls": wholeCalls(calls)})

	pr, pw := io.Pipe()
	t0 := time.Now()
	type answer struct {
		at     time.Time
		status int
		err    error
	}
	streamDone, wholeDone := make(chan answer, 1), make(chan answer, 1)
	go func() {
		_, status, err := sb.post(ctx, path, ct, pr)
		_ = pr.Close()
		streamDone <- answer{time.Now(), status, err}
	}()
	go func() {
		sleepUntil(ctx, t0.Add(fixtureEnd))
		_, status, err := sb.post(ctx, "/v1/sessions/"+sess+"-w/turns", "application/json", bytes.NewReader(wholeBody))
		wholeDone <- answer{time.Now(), status, err}
	}()
	next := 0
	write := func(upTo int) bool {
		for ; next <= upTo && next < len(fx.Parts); next++ {
			if _, err := io.WriteString(pw, fx.Parts[next]); err != nil {
				return false
			}
		}
		return true
	}
	written := true
	for k, off := range fixtureCalls {
		upTo := fx.CallEnds[k]
		if gap > 0 && upTo == fx.End {
			upTo-- // the finish event completes the last chat call, at the end
		}
		sleepUntil(ctx, t0.Add(min(off+gap, fixtureEnd)))
		written = written && write(upTo)
	}
	sleepUntil(ctx, t0.Add(fixtureEnd))
	written = written && write(len(fx.Parts)-1)
	end := time.Now()
	_ = pw.Close()
	s, w := <-streamDone, <-wholeDone
	switch {
	case !written || s.err != nil:
		sb.fail("streamed_transport")
	case s.status != 200:
		sb.fail("streamed_http_" + strconv.Itoa(s.status))
	case w.err != nil:
		sb.fail("whole_transport")
	case w.status != 200:
		sb.fail("whole_http_" + strconv.Itoa(w.status))
	default:
		return s.at.Sub(end), w.at.Sub(t0.Add(fixtureEnd)), true
	}
	return 0, 0, false
}

func turnIDOf(format string, i int) string {
	switch format {
	case "openai.chat":
		return fmt.Sprintf("chatcmpl-f%d", i)
	case "openai.responses":
		return fmt.Sprintf("resp_f%d", i)
	case "anthropic.messages":
		return fmt.Sprintf("msg_f%d", i)
	}
	return fmt.Sprintf("f%d", i)
}

func wholeCalls(calls []streamfix.Call) []any {
	out := make([]any, len(calls))
	for i, c := range calls {
		out[i] = map[string]any{"id": c.ID, "name": c.Name, "arguments": json.RawMessage(c.Arguments)}
	}
	return out
}

func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// post sends body to path and reads the whole answer.
func (sb *streamBench) post(ctx context.Context, path, contentType string, body io.Reader) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.base+path, body)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Prefer", "wait=60")
	if sb.token != "" {
		req.Header.Set("Authorization", "Bearer "+sb.token)
	}
	resp, err := sb.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, errors.Join(errors.New("reading the answer"), err)
	}
	return got, resp.StatusCode, nil
}

// startTarget is the turnd a bench mode drives, with the bench's tools
// served (on c.ToolAddr): the one at c.URL, or one it starts (c.ServerBinary
// on c.Store) in a temp dir. store says which; stop ends what it started.
func startTarget(ctx context.Context, c Config, logf func(string, ...any)) (target Target, store string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "turnd-bench-")
	if err != nil {
		return target, "", nil, err
	}
	tools, err := StartToolServer(c.ToolAddr)
	if err != nil {
		os.RemoveAll(dir)
		return target, "", nil, err
	}
	done := func() {
		tools.Close()
		os.RemoveAll(dir)
	}
	target = Target{URL: c.URL, Token: c.Token}
	if c.URL != "" {
		return target, "a running turnd", done, nil
	}
	db := c.DatabaseURL
	store = "postgres (DATABASE_URL)"
	if c.Store == StoreSQLite || db == "" {
		db, store = "", "sqlite (embedded, temp dir)"
	}
	logf("starting turnd (%s, store: %s)", c.ServerBinary, store)
	server, err := StartServer(ctx, ServerConfig{Binary: c.ServerBinary, Dir: dir, DatabaseURL: db, ToolConfig: ToolConfig(tools.URL())})
	if err != nil {
		done()
		return target, store, nil, err
	}
	target.URL = server.URL
	return target, store, func() {
		if err := server.Stop(); err != nil {
			logf("stopping turnd: %v\n%s", err, server.LogTail(20))
		}
		done()
	}, nil
}
