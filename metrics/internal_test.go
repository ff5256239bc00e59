package metrics

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnd/turnd/turn"
)

// TestStoreOpsCoverStore: every turn.Store method but Close has its op
// label, and timedStore defines it (a promoted method would go untimed).
func TestStoreOpsCoverStore(t *testing.T) {
	t.Parallel()
	iface := reflect.TypeFor[turn.Store]()
	var want []string
	for i := range iface.NumMethod() {
		name := iface.Method(i).Name
		if name == "Close" {
			continue
		}
		want = append(want, snake(name))
	}
	got := slices.Clone(storeOps)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("store ops %v, want one per turn.Store method: %v", got, want)
	}
}

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// countingStore answers PendingCount from a script of results.
type countingStore struct {
	turn.Store
	results []error
	n       int64
	calls   int
}

func (c *countingStore) PendingCount(context.Context) (int64, error) {
	err := c.results[min(c.calls, len(c.results)-1)]
	c.calls++
	c.n++
	return c.n, err
}

func gatherPending(t *testing.T, g prometheus.Gatherer) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == PendingCalls {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestPendingCollector(t *testing.T) {
	t.Parallel()
	down := errors.New("store down")
	for _, tt := range []struct {
		name    string
		ttl     time.Duration
		results []error
		// want per scrape: the value, or -1 for no gauge
		want  []float64
		calls int
	}{
		{"counts on every scrape without a TTL", -1, []error{nil}, []float64{1, 2, 3}, 3},
		{"reuses a count within the TTL", time.Hour, []error{nil}, []float64{1, 1, 1}, 1},
		{"no gauge before a first count", -1, []error{down, down, nil}, []float64{-1, -1, 3}, 3},
		{"the last count while the store fails", -1, []error{nil, down, down}, []float64{1, 1, 1}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &countingStore{results: tt.results}
			reg := prometheus.NewRegistry()
			if _, err := New(reg, Options{PendingCount: st.PendingCount, PendingTTL: tt.ttl}); err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.want {
				v, ok := gatherPending(t, reg)
				switch {
				case want < 0 && ok:
					t.Errorf("scrape %d: gauge %v, want none", i, v)
				case want >= 0 && (!ok || v != want):
					t.Errorf("scrape %d: gauge %v (present %v), want %v", i, v, ok, want)
				}
			}
			if st.calls != tt.calls {
				t.Errorf("%d count queries, want %d", st.calls, tt.calls)
			}
		})
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	names := Names()
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("Names is not sorted and unique: %v", names)
	}
	for _, n := range append(slices.Clone(turndNames), "go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes") {
		if !slices.Contains(names, n) {
			t.Errorf("Names lacks %s", n)
		}
	}
	// Each of turnd's names is registered by New, with nothing else.
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{PendingCount: func(context.Context) (int64, error) { return 0, nil }, Build: &Build{Version: "v1", Revision: "abc", GoVersion: "go1"}}); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	var described []string
	for d := range ch {
		s := d.String()
		_, rest, _ := strings.Cut(s, `fqName: "`)
		name, _, _ := strings.Cut(rest, `"`)
		described = append(described, name)
	}
	slices.Sort(described)
	want := slices.Sorted(slices.Values(turndNames))
	if !slices.Equal(described, want) {
		t.Errorf("New registers %v, want %v", described, want)
	}
}

func TestNewTwiceOnOneRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, Options{}); err == nil {
		t.Error("a second New on the same registry succeeded")
	}
}

func TestStatusCode(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]string{200: "200", 202: "202", 413: "413", 599: "599", 101: "101", 0: "other", 1000: "other"} {
		if got := statusCode(code); got != want {
			t.Errorf("statusCode(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestDispatchIsAlsoNative: the dispatch histogram carries native buckets
// (for scrapers that negotiate protobuf) beside its classic ones; the
// others are classic only.
func TestDispatchIsAlsoNative(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.CallAccounted("echo", turn.CallOK, 3*time.Millisecond)
	m.AttemptFinished("echo", "ok", time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case DispatchDuration:
			found++
			h := mf.GetMetric()[0].GetHistogram()
			if h.Schema == nil || len(h.GetPositiveSpan()) == 0 {
				t.Errorf("%s has no native buckets: %v", DispatchDuration, h)
			}
			if len(h.GetBucket()) != len(latencyBuckets) {
				t.Errorf("%s has %d classic buckets, want %d", DispatchDuration, len(h.GetBucket()), len(latencyBuckets))
			}
		case AttemptDuration:
			found++
			if h := mf.GetMetric()[0].GetHistogram(); h.Schema != nil {
				t.Errorf("%s is native too", AttemptDuration)
			}
		}
	}
	if found != 2 {
		t.Errorf("found %d of the two histograms", found)
	}
}

// TestRequestLabelsBounded: methods outside the standard set and codes
// outside 100-999 share one label value each.
func TestRequestLabelsBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"GET", "BREW", "PROPFIND", "X-1"} {
		m.ObserveRequest(method, "unmatched", 405, time.Millisecond)
	}
	m.ObserveRequest("GET", "/healthz", 1000, time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, mf := range mfs {
		if mf.GetName() != HTTPRequestsTotal {
			continue
		}
		for _, s := range mf.GetMetric() {
			var ls []string
			for _, l := range s.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			series = append(series, strings.Join(ls, ","))
		}
	}
	slices.Sort(series)
	want := []string{
		"code=405,method=GET,route=unmatched",
		"code=405,method=other,route=unmatched",
		"code=other,method=GET,route=/healthz",
	}
	if !slices.Equal(series, want) {
		t.Errorf("series %v, want %v", series, want)
	}
}
