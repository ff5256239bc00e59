package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/turnd/turnd/metrics"
)

// exportedMetrics are the metric families turnd exports, from the metrics
// package itself (histograms by their family name; their _bucket, _sum and
// _count series are accepted too), Go and process collectors included. It is
// the one list the metric-name checks compare against.
var exportedMetrics = metrics.Names()

// scrapeSeries are written by Prometheus itself for every target, not
// exported by turnd, and may be queried all the same.
var scrapeSeries = []string{
	"up", "scrape_duration_seconds", "scrape_samples_scraped",
	"scrape_samples_post_metric_relabeling", "scrape_series_added",
	"ALERTS", "ALERTS_FOR_STATE",
}

// unknownMetrics returns the metric names expr selects that are neither in
// exported (with histogram suffixes) nor series
// Prometheus writes itself.
func unknownMetrics(expr string, exported []string) ([]string, error) {
	names, err := metricNames(expr)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for _, n := range names {
		if !knownMetric(n, exported) {
			unknown = append(unknown, n)
		}
	}
	return unknown, nil
}

func knownMetric(name string, exported []string) bool {
	if slices.Contains(exported, name) || slices.Contains(scrapeSeries, name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(exported, base) {
			return true
		}
	}
	return false
}

// promqlFunctions are PromQL's functions (Prometheus 2 and 3). A name
// followed by "(" that is not among them is reported, so that a misspelt
// function is not taken for a metric.
var promqlFunctions = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`
		abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time
		ceil changes clamp clamp_max clamp_min cos cosh count_over_time
		day_of_month day_of_week day_of_year days_in_month deg delta deriv
		double_exponential_smoothing exp floor histogram_avg histogram_count
		histogram_fraction histogram_quantile histogram_stddev histogram_stdvar
		histogram_sum holt_winters hour idelta increase info irate label_join
		label_replace last_over_time ln log10 log2 mad_over_time max_over_time
		min_over_time minute month pi predict_linear present_over_time
		quantile_over_time rad rate resets round scalar sgn sin sinh sort
		sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time
		stdvar_over_time sum_over_time tan tanh time timestamp vector year
		start end`) {
		promqlFunctions[f] = true
	}
}

// promqlAggregations take an optional by/without clause before or after
// their parenthesised arguments.
var promqlAggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true,
	"stddev": true, "stdvar": true, "count": true, "count_values": true,
	"bottomk": true, "topk": true, "quantile": true, "limitk": true,
	"limit_ratio": true,
}

// promqlKeywords are binary operators and modifiers spelt as words.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"atan2": true, "inf": true, "nan": true,
}

// promqlLabelLists are followed by a parenthesised list of label names
// (optional after group_left and group_right).
var promqlLabelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true,
}

// metricNames returns the metric names a PromQL expression selects, each
// once, in order of first appearance: bare names (rate(x[5m])), names before
// label matchers (x{a="b"}) and names given as {__name__="x"}. It skips
// function and aggregation names, label names in matchers and in
// by/without/on/ignoring/group_left/group_right lists, string literals,
// numbers (1, 0.5, 1e-3, 0x1f, Inf, NaN), durations ([5m], offset 1h,
// [5m:30s] subqueries), comments, and Grafana's template variables
// ($__rate_interval, $var, ${var}). An expression it cannot read — an
// unterminated string, brace or bracket, unbalanced parentheses, an unknown
// function, a character PromQL does not have, a regular expression on
// __name__ — is an error rather than a guess.
func metricNames(expr string) ([]string, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("empty expression")
	}
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	s := expr
	depth := 0
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, name, err := readMatchers(s, i)
			if err != nil {
				return nil, err
			}
			if name != "" {
				add(name)
			}
			i = end
		case c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("offset %d: unterminated range [", i)
			}
			i += end + 1
		case c == '(':
			depth++
			i++
		case c == ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("offset %d: unbalanced )", i)
			}
			i++
		case c == '$':
			i = skipTemplateVar(s, i)
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			i = skipNumber(s, i)
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			word := s[i:j]
			lower := strings.ToLower(word)
			next := skipSpace(s, j)
			nextIsParen := next < len(s) && s[next] == '('
			switch {
			case promqlLabelLists[lower]:
				if nextIsParen {
					end, err := skipLabelList(s, next)
					if err != nil {
						return nil, fmt.Errorf("%w after %s", err, word)
					}
					j = end
				} else if lower != "group_left" && lower != "group_right" {
					return nil, fmt.Errorf("offset %d: %s without a label list", i, word)
				}
			case promqlAggregations[lower], promqlKeywords[lower]:
			case nextIsParen:
				if !promqlFunctions[word] {
					return nil, fmt.Errorf("offset %d: unknown function %s", i, word)
				}
			default:
				add(word)
			}
			i = j
		case strings.IndexByte("+-*/%^=!<>,@:", c) >= 0:
			i++
		default:
			return nil, fmt.Errorf("offset %d: unexpected character %q", i, c)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced parentheses: %d left open", depth)
	}
	return names, nil
}

// skipString returns the offset after the string literal starting at i.
func skipString(s string, i int) (int, error) {
	quote := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && quote != '`':
			j++
		case s[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("offset %d: unterminated string", i)
}

// readMatchers reads the label matchers in braces starting at i and returns
// the offset after them and the metric name a __name__="x" matcher gives.
func readMatchers(s string, i int) (end int, name string, err error) {
	j := i + 1
	for {
		j = skipSpace(s, j)
		if j >= len(s) {
			return 0, "", fmt.Errorf("offset %d: unterminated {", i)
		}
		if s[j] == '}' {
			return j + 1, name, nil
		}
		if s[j] == ',' {
			j++
			continue
		}
		// label (a name, or a quoted UTF-8 name in Prometheus 3)
		var label string
		switch {
		case isIdentStart(s[j]):
			k := j
			for k < len(s) && isIdentChar(s[k]) {
				k++
			}
			label, j = s[j:k], k
		case s[j] == '"':
			k, err := skipString(s, j)
			if err != nil {
				return 0, "", err
			}
			label, j = s[j+1:k-1], k
			if next := skipSpace(s, j); next < len(s) && (s[next] == ',' || s[next] == '}') {
				// {"metric.name"}: a quoted metric name on its own.
				if name != "" {
					return 0, "", fmt.Errorf("offset %d: two metric names in one selector", j)
				}
				name = label
				continue
			}
		default:
			return 0, "", fmt.Errorf("offset %d: expected a label name in matchers, found %q", j, s[j])
		}
		j = skipSpace(s, j)
		var op string
		for _, o := range []string{"!=", "=~", "!~", "="} {
			if strings.HasPrefix(s[j:], o) {
				op = o
				break
			}
		}
		if op == "" {
			return 0, "", fmt.Errorf("offset %d: expected =, !=, =~ or !~ after label %s", j, label)
		}
		j = skipSpace(s, j+len(op))
		if j >= len(s) || (s[j] != '"' && s[j] != '\'' && s[j] != '`') {
			return 0, "", fmt.Errorf("offset %d: expected a string after %s%s", j, label, op)
		}
		k, err := skipString(s, j)
		if err != nil {
			return 0, "", err
		}
		if label == "__name__" {
			if op != "=" {
				return 0, "", fmt.Errorf("offset %d: __name__%s selects metrics by pattern; name them instead", j, op)
			}
			name = s[j+1 : k-1]
		}
		j = k
	}
}

// skipLabelList returns the offset after the parenthesised list of label
// names starting at i: names (bare or quoted) separated by commas.
func skipLabelList(s string, i int) (int, error) {
	for j := i + 1; j < len(s); {
		switch c := s[j]; {
		case c == ')':
			return j + 1, nil
		case c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || isIdentChar(c):
			j++
		case c == '"':
			end, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = end
		default:
			return 0, fmt.Errorf("offset %d: %q in a label list", j, c)
		}
	}
	return 0, fmt.Errorf("offset %d: unterminated label list", i)
}

// skipTemplateVar skips a Grafana variable: $name or ${name[:format]}.
func skipTemplateVar(s string, i int) int {
	j := i + 1
	if j < len(s) && s[j] == '{' {
		if end := strings.IndexByte(s[j:], '}'); end >= 0 {
			return j + end + 1
		}
		return len(s)
	}
	for j < len(s) && isIdentChar(s[j]) {
		j++
	}
	return j
}

// skipNumber skips a number or duration: 1, 0.5, 1e-3, 0x1f, 5m, 1h30m.
func skipNumber(s string, i int) int {
	j := i
	for j < len(s) && (isIdentChar(s[j]) || s[j] == '.') {
		if (s[j] == 'e' || s[j] == 'E') && j+1 < len(s) && (s[j+1] == '+' || s[j+1] == '-') &&
			!strings.HasPrefix(strings.ToLower(s[i:]), "0x") {
			j++
		}
		j++
	}
	return j
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }

func TestMetricNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr string
		want       []string
	}{
		{"bare", "turnd_pending_calls", []string{"turnd_pending_calls"}},
		{"rate with range", "rate(turnd_calls_total[5m])", []string{"turnd_calls_total"}},
		{"quantile over buckets", `histogram_quantile(0.99, sum by (le, tool) (rate(turnd_dispatch_duration_seconds_bucket{tool=~"a|b", outcome!="ok"}[5m])))`,
			[]string{"turnd_dispatch_duration_seconds_bucket"}},
		{"by after the arguments", `sum(rate(x[1m])) by (instance)`, []string{"x"}},
		{"no spaces", `sum by(le)(rate(x_bucket[1m]))`, []string{"x_bucket"}},
		{"without", `sum without (instance, job) (x)`, []string{"x"}},
		{"vector matching", `a / on (job) group_left (tool) b * ignoring(code) group_right c`, []string{"a", "b", "c"}},
		{"group_left without labels", `a * on (job) group_left b`, []string{"a", "b"}},
		{"set operators", "a and b or c unless d", []string{"a", "b", "c", "d"}},
		{"set operators in capitals", "a AND b", []string{"a", "b"}},
		{"comparison with bool", "rate(x[5m]) > bool 0", []string{"x"}},
		{"offset and @", `x offset 5m + y offset -1h30m + z @ 1609746000 + w @ start()`, []string{"x", "y", "z", "w"}},
		{"subquery", "max_over_time(rate(x[5m])[1h:30s])", []string{"x"}},
		{"numbers", "1e-3 * x + 0x1f - .5 + 2E+3 / Inf - NaN", []string{"x"}},
		{"unary minus", "-x", []string{"x"}},
		{"name matcher", `{__name__="foo", job="a"}`, []string{"foo"}},
		{"quoted name", `{"foo", job="a"}`, []string{"foo"}},
		{"strings with parentheses and dollars", `label_replace(up, "host", "$1", "instance", "(.*):\"[0-9]+\"")`, []string{"up"}},
		{"single-quoted and raw strings", "x{a='b}c', d=`e\"f`}", []string{"x"}},
		{"count_values", `count_values("version", build_info)`, []string{"build_info"}},
		{"topk", `topk(5, x)`, []string{"x"}},
		{"no metric", `vector(1) + time()`, nil},
		{"grafana variables", `rate(x{instance=~"$instance"}[$__rate_interval]) * ${factor} + $offset`, []string{"x"}},
		{"absent", `absent(up{job="turnd"} == 1)`, []string{"up"}},
		{"names once, in order", "b + a + b", []string{"b", "a"}},
		{"colons", "job:turnd_calls:rate5m", []string{"job:turnd_calls:rate5m"}},
		{"comment", "x # the rate of y\n + z", []string{"x", "z"}},
		{"multi-line", "sum by (job) (\n  rate(x[5m])\n)\n/ sum by (job) (rate(y[5m]))", []string{"x", "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := metricNames(tt.expr)
			if err != nil {
				t.Fatalf("metricNames(%q): %v", tt.expr, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
			}
		})
	}
}

func TestMetricNamesRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, expr, want string }{
		{"empty", "  ", "empty expression"},
		{"unterminated string", `x{a="b}`, "unterminated string"},
		{"unterminated braces", `x{a="b"`, "unterminated {"},
		{"unterminated range", `rate(x[5m)`, "unterminated range"},
		{"open parenthesis", `sum(rate(x[5m])`, "unbalanced parentheses"},
		{"extra parenthesis", `sum(x))`, "unbalanced )"},
		{"misspelt function", `histogram_quantle(0.9, x)`, "unknown function histogram_quantle"},
		{"by without labels", `sum by x`, "by without a label list"},
		{"unterminated label list", `sum by (le x`, "unterminated label list after by"},
		{"expression in a label list", `sum by (le (rate(x[5m]))`, "'(' in a label list after by"},
		{"name by pattern", `{__name__=~"turnd_.*"}`, "selects metrics by pattern"},
		{"matcher without operator", `x{a "b"}`, "expected =, !=, =~ or !~"},
		{"matcher without value", `x{a=b}`, "expected a string"},
		{"matcher of a number", `x{1="b"}`, "expected a label name"},
		{"two quoted names", `{"a", "b"}`, "two metric names"},
		{"semicolon", `x; y`, "unexpected character ';'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := metricNames(tt.expr)
			if err == nil {
				t.Fatalf("metricNames(%q) = %q, want an error", tt.expr, got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("metricNames(%q) error %q, want it to say %q", tt.expr, err, tt.want)
			}
		})
	}
}

func TestUnknownMetrics(t *testing.T) {
	t.Parallel()
	exported := []string{"turnd_calls_total", "turnd_dispatch_duration_seconds", "go_goroutines", "process_resident_memory_bytes"}
	tests := []struct {
		expr string
		want []string
	}{
		{"rate(turnd_calls_total[5m])", nil},
		{"rate(turnd_dispatch_duration_seconds_bucket[5m])", nil},
		{"turnd_dispatch_duration_seconds_sum / turnd_dispatch_duration_seconds_count", nil},
		{"go_goroutines + process_resident_memory_bytes + up", nil},
		{"turnd_call_total", []string{"turnd_call_total"}},
		{"turnd_dispatch_duration_bucket", []string{"turnd_dispatch_duration_bucket"}},
		{"go_ + process_", []string{"go_", "process_"}},
		{"go_threads_total + process_rss", []string{"go_threads_total", "process_rss"}},
		{"rate(turnd_webhooks_total[5m]) / turnd_calls_total", []string{"turnd_webhooks_total"}},
	}
	for _, tt := range tests {
		got, err := unknownMetrics(tt.expr, exported)
		if err != nil {
			t.Fatalf("unknownMetrics(%q): %v", tt.expr, err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("unknownMetrics(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
	if _, err := unknownMetrics("sum(", exported); err == nil {
		t.Error("unknownMetrics passed on an expression it cannot read")
	}
}

// FuzzMetricNames holds metricNames to an answer or an error on any input:
// no panic, and no empty name.
func FuzzMetricNames(f *testing.F) {
	for _, s := range []string{
		`histogram_quantile(0.99, sum by (le) (rate(x_bucket{a=~"b|c"}[5m])))`,
		`{__name__="x", "y"="z"} offset -5m @ start()`,
		`a / on (job) group_left (tool) b`,
		"x # c\n + 1e-3",
		`label_replace(up, "a", "$1", "b", "(.*)")`,
		`rate(x{i=~"$i"}[$__rate_interval]) * ${f}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := metricNames(expr)
		if err != nil {
			return
		}
		for _, n := range names {
			if n == "" {
				t.Fatalf("metricNames(%q) returned an empty name", expr)
			}
		}
	})
}
