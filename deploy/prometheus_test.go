package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

const (
	prometheusConfig = "compose/prometheus/prometheus.yml"
	alertRules       = "compose/prometheus/alerts.yml"
	alertRulesTests  = "compose/prometheus/alerts_test.yml"
	dashboardFile    = "compose/grafana/dashboards/turnd.json"
	datasourceFile   = "compose/grafana/provisioning/datasources/prometheus.yaml"
)

func TestPrometheusConfigPromtool(t *testing.T) {
	t.Parallel()
	runTool(t, promtool(t), "check", "config", prometheusConfig)
}

func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	p := promtool(t)
	runTool(t, p, "check", "rules", alertRules)
	runTool(t, p, "test", "rules", alertRulesTests)
}

// requiredAlerts names, for each thing an operator must be alerted on, a
// metric (and a fragment of the expression) some rule must use.
var requiredAlerts = []struct{ what, metric, fragment string }{
	{"a replica down", "up", ""},
	{"a replica not ready", "turnd_http_requests_total", `"/readyz"`},
	{"the 5xx rate", "turnd_http_requests_total", `"5.."`},
	{"dispatch p99", "turnd_dispatch_duration_seconds_bucket", "histogram_quantile(0.99"},
	{"pending calls growing", "turnd_pending_calls", "deriv("},
	{"webhook failures", "turnd_webhook_deliveries_total", ""},
	{"completions timed out", "turnd_completions_total", `"timed_out"`},
}

// checkAlertRules returns the problems of a rules file's groups: every rule
// an alert with a unique name, a severity, a summary and an expression over
// metrics turnd exports; and every required alert present.
func checkAlertRules(doc any, exported []string) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	groups := digList(doc, "groups")
	if len(groups) == 0 {
		return []string{"no rule groups"}
	}
	seen := map[string]bool{}
	var exprs []string
	for gi, g := range groups {
		rules := digList(g, "rules")
		if len(rules) == 0 {
			bad("group %d (%s): no rules", gi, digString(g, "name"))
		}
		for _, r := range rules {
			name := digString(r, "alert")
			if name == "" {
				bad("group %s: a rule without an alert name (recording rules belong elsewhere)", digString(g, "name"))
				continue
			}
			if seen[name] {
				bad("%s: two alerts of this name", name)
			}
			seen[name] = true
			if sev := digString(r, "labels", "severity"); !slices.Contains([]string{"critical", "warning", "info"}, sev) {
				bad("%s: severity %q, want critical, warning or info", name, sev)
			}
			if digString(r, "annotations", "summary") == "" {
				bad("%s: no summary annotation", name)
			}
			expr := digString(r, "expr")
			unknown, err := unknownMetrics(expr, exported)
			switch {
			case err != nil:
				bad("%s: expr: %v", name, err)
			case len(unknown) > 0:
				bad("%s: metrics turnd does not export: %v", name, unknown)
			}
			exprs = append(exprs, expr)
		}
	}
	for _, req := range requiredAlerts {
		if !slices.ContainsFunc(exprs, func(e string) bool {
			names, _ := metricNames(e)
			return slices.Contains(names, req.metric) && strings.Contains(e, req.fragment)
		}) {
			bad("no alert on %s (an expression over %s with %s)", req.what, req.metric, req.fragment)
		}
	}
	return problems
}

func TestAlertRules(t *testing.T) {
	t.Parallel()
	for _, p := range checkAlertRules(yamlFile(t, alertRules), exportedMetrics) {
		t.Error(p)
	}
}

func TestAlertRulesRejects(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	tests := []struct{ name, old, new, want string }{
		{"unknown metric", "turnd_pending_calls) > 100", "turnd_pending_call) > 100", "does not export: [turnd_pending_call]"},
		{"unreadable expr", "expr: up{job=\"turnd\"} == 0", "expr: up{job=\"turnd\" == 0", "expr:"},
		{"no severity", "severity: critical", "priority: critical", "severity \"\""},
		{"no summary", `summary: "no turnd replica is up"`, `title: "no turnd replica is up"`, "TurndNoReplicaUp: no summary"},
		{"duplicate name", "alert: TurndNoReplicaUp", "alert: TurndReplicaDown", "two alerts of this name"},
		{"recording rule", "alert: TurndStoreSlow", "record: turnd:store:p99", "without an alert name"},
		{"missing required", `{result="timed_out"}`, `{result="late"}`, "no alert on completions timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(src, tt.old) {
				t.Fatalf("alerts.yml no longer contains %q: update this case", tt.old)
			}
			var doc any
			if err := yaml.Unmarshal([]byte(strings.Replace(src, tt.old, tt.new, 1)), &doc); err != nil {
				t.Fatal(err)
			}
			got := checkAlertRules(doc, exportedMetrics)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("problems %q, want one saying %q", got, tt.want)
			}
		})
	}
}

// dashboardQuery is one PromQL expression of a dashboard and where it is.
type dashboardQuery struct{ where, expr string }

// dashboardQueries returns the PromQL of every panel target (rows' nested
// panels included) and of every query variable.
func dashboardQueries(d map[string]any) ([]dashboardQuery, error) {
	var out []dashboardQuery
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			title := digString(p, "title")
			for i, tg := range digList(p, "targets") {
				out = append(out, dashboardQuery{fmt.Sprintf("panel %q target %d", title, i), digString(tg, "expr")})
			}
			walk(digList(p, "panels"))
		}
	}
	walk(digList(d, "panels"))
	for _, v := range digList(d, "templating", "list") {
		if digString(v, "type") != "query" {
			continue
		}
		q := digString(v, "query")
		if q == "" {
			q = digString(v, "query", "query")
		}
		expr, err := variableExpr(q)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", digString(v, "name"), err)
		}
		if expr != "" {
			out = append(out, dashboardQuery{"variable " + digString(v, "name"), expr})
		}
	}
	return out, nil
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// variableExpr returns the PromQL inside a Grafana Prometheus variable
// query: label_values(expr, label), label_values(label) (none),
// query_result(expr).
func variableExpr(q string) (string, error) {
	q = strings.TrimSpace(q)
	if m := labelValues.FindStringSubmatch(q); m != nil {
		return m[1], nil
	}
	if strings.HasPrefix(q, "label_values(") && !strings.Contains(q, ",") {
		return "", nil
	}
	if rest, ok := strings.CutPrefix(q, "query_result("); ok && strings.HasSuffix(rest, ")") {
		return strings.TrimSuffix(rest, ")"), nil
	}
	return "", fmt.Errorf("query %q: only label_values(...) and query_result(...) are understood", q)
}

// requiredPanels names what the dashboard must show: a metric and a
// fragment of the expression that shows it.
var requiredPanels = []struct{ what, metric, fragment string }{
	{"dispatch latency percentiles", "turnd_dispatch_duration_seconds_bucket", "histogram_quantile("},
	{"calls by outcome", "turnd_calls_total", "by (outcome)"},
	{"pending calls", "turnd_pending_calls", ""},
	{"budget truncations", "turnd_budget_truncations_total", ""},
	{"turns", "turnd_turns_total", ""},
	{"completions", "turnd_completions_total", "by (result)"},
	{"HTTP requests", "turnd_http_requests_total", ""},
}

// checkDashboard returns the problems of a Grafana dashboard: its queries'
// metric names, its required panels, its datasource references, panel ids
// and layout.
func checkDashboard(d map[string]any, datasourceUID string, exported []string) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if digString(d, "uid") == "" || digString(d, "title") == "" {
		bad("no uid or title")
	}
	dsVar := ""
	for _, v := range digList(d, "templating", "list") {
		if digString(v, "type") == "datasource" {
			if digString(v, "query") != "prometheus" {
				bad("datasource variable %s of type %q", digString(v, "name"), digString(v, "query"))
			}
			dsVar = "${" + digString(v, "name") + "}"
		}
	}
	for _, v := range digList(d, "templating", "list") {
		if u := digString(v, "datasource", "uid"); digString(v, "type") == "query" && u != datasourceUID && (dsVar == "" || u != dsVar) {
			bad("variable %s: datasource uid %q is neither the provisioned %q nor the variable %s", digString(v, "name"), u, datasourceUID, dsVar)
		}
	}
	queries, err := dashboardQueries(d)
	if err != nil {
		bad("%v", err)
	}
	var names [][]string
	for _, q := range queries {
		if strings.TrimSpace(q.expr) == "" {
			bad("%s: empty expression", q.where)
			continue
		}
		n, err := metricNames(q.expr)
		if err != nil {
			bad("%s: %v", q.where, err)
			continue
		}
		names = append(names, n)
		var unknown []string
		for _, m := range n {
			if !knownMetric(m, exported) {
				unknown = append(unknown, m)
			}
		}
		if len(unknown) > 0 {
			bad("%s: metrics turnd does not export: %v", q.where, unknown)
		}
	}
	for _, req := range requiredPanels {
		if !slices.ContainsFunc(queries, func(q dashboardQuery) bool {
			n, _ := metricNames(q.expr)
			return slices.Contains(n, req.metric) && strings.Contains(q.expr, req.fragment)
		}) {
			bad("no panel shows %s (%s with %q)", req.what, req.metric, req.fragment)
		}
	}

	ids := map[int64]string{}
	type rect struct {
		title      string
		x, y, w, h int64
	}
	var rects []rect
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			title := digString(p, "title")
			id, ok := digInt(p, "id")
			if !ok {
				bad("panel %q: no id", title)
			} else if other, dup := ids[id]; dup {
				bad("panels %q and %q share id %d", other, title, id)
			} else {
				ids[id] = title
			}
			var r rect
			r.title = title
			r.x, _ = digInt(p, "gridPos", "x")
			r.y, _ = digInt(p, "gridPos", "y")
			r.w, _ = digInt(p, "gridPos", "w")
			r.h, _ = digInt(p, "gridPos", "h")
			if r.w <= 0 || r.h <= 0 || r.x < 0 || r.x+r.w > 24 {
				bad("panel %q: gridPos %+v outside the 24-column grid", title, r)
			}
			for _, o := range rects {
				if r.x < o.x+o.w && o.x < r.x+r.w && r.y < o.y+o.h && o.y < r.y+r.h {
					bad("panels %q and %q overlap", o.title, title)
				}
			}
			rects = append(rects, r)
			if digString(p, "type") == "row" {
				walk(digList(p, "panels"))
				continue
			}
			if len(digList(p, "targets")) == 0 {
				bad("panel %q: no queries", title)
			}
			uids := []string{digString(p, "datasource", "uid")}
			for _, tg := range digList(p, "targets") {
				uids = append(uids, digString(tg, "datasource", "uid"))
			}
			for _, u := range uids {
				if u != datasourceUID && (dsVar == "" || u != dsVar) {
					bad("panel %q: datasource uid %q is neither the provisioned %q nor the variable %s", title, u, datasourceUID, dsVar)
					break
				}
			}
		}
	}
	walk(digList(d, "panels"))
	if len(ids) < len(requiredPanels) {
		bad("%d panels", len(ids))
	}
	return problems
}

func loadDashboard(t *testing.T) (map[string]any, string) {
	t.Helper()
	d, err := jsonFile(dashboardFile)
	if err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	uid := digString(yamlFile(t, datasourceFile), "datasources", 0, "uid")
	if uid == "" {
		t.Fatalf("%s: no datasource uid", datasourceFile)
	}
	return d, uid
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	d, uid := loadDashboard(t)
	for _, p := range checkDashboard(d, uid, exportedMetrics) {
		t.Error(p)
	}
}

// TestDashboardRejects breaks the parsed dashboard one way at a time.
func TestDashboardRejects(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	tests := []struct{ name, old, new, want string }{
		{"unknown metric", "max(turnd_pending_calls{", "max(turnd_pending{", "does not export: [turnd_pending]"},
		{"unknown in a variable", `label_values(up{job=\"turnd\"}, instance)"`, `label_values(turnd_up{job=\"turnd\"}, instance)"`, "does not export: [turnd_up]"},
		{"unknown variable query", `"query": "label_values(up{job=\"turnd\"}, instance)"`, `"query": "metrics(turnd_.*)"`, "only label_values"},
		{"unreadable expr", "sum by (outcome) (rate(", "sum by (outcome (rate(", "in a label list"},
		{"no outcome panel", "sum by (outcome)", "sum by (tool)", "no panel shows calls by outcome"},
		{"no percentiles", "histogram_quantile(0.5, sum by (le) (rate(turnd_dispatch", "sum(rate(turnd_dispatch", "Dispatch latency percentiles"},
		{"foreign datasource", `"uid": "${datasource}"`, `"uid": "grafanacloud-prom"`, "datasource uid \"grafanacloud-prom\""},
		{"duplicate id", `"id": 3,`, `"id": 2,`, "share id 2"},
		{"overlap", `"x": 18,`, `"x": 12,`, "overlap"},
		{"off the grid", `"w": 8,`, `"w": 28,`, "outside the 24-column grid"},
	}
	uid := digString(yamlFile(t, datasourceFile), "datasources", 0, "uid")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(src, tt.old) {
				t.Fatalf("the dashboard no longer contains %q: update this case", tt.old)
			}
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.Replace(src, tt.old, tt.new, 1)), &d); err != nil {
				t.Fatal(err)
			}
			got := checkDashboard(d, uid, exportedMetrics)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("problems %q, want one saying %q", got, tt.want)
			}
		})
	}
}

func TestDashboardRejectsPanelDatasource(t *testing.T) {
	t.Parallel()
	d, uid := loadDashboard(t)
	panel := digMap(d, "panels", 1)
	tg := digMap(panel, "targets", 0)
	if panel == nil || tg == nil {
		t.Fatal("the dashboard's second panel has no target: update this test")
	}
	tg["datasource"] = map[string]any{"type": "prometheus", "uid": "elsewhere"}
	got := checkDashboard(d, uid, exportedMetrics)
	want := fmt.Sprintf("panel %q: datasource uid \"elsewhere\"", digString(panel, "title"))
	if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("problems %q, want one saying %q", got, want)
	}
}

// grafanaVar is a Grafana template variable in an expression.
var grafanaVar = regexp.MustCompile(`\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// TestDashboardPromtool has promtool parse every dashboard query, Grafana's
// variables replaced by values of their kind, as recording rules.
func TestDashboardPromtool(t *testing.T) {
	t.Parallel()
	p := promtool(t)
	d, _ := loadDashboard(t)
	queries, err := dashboardQueries(d)
	if err != nil {
		t.Fatal(err)
	}
	var rules []map[string]string
	for i, q := range queries {
		expr := grafanaVar.ReplaceAllStringFunc(q.expr, func(v string) string {
			switch strings.Trim(v, "${}") {
			case "__rate_interval", "__interval", "__range":
				return "5m"
			case "__interval_ms", "__range_s", "__range_ms":
				return "300"
			}
			return ".*" // a variable inside a regex matcher
		})
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:query_%d", i), "expr": expr})
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, p, "check", "rules", file)
}
