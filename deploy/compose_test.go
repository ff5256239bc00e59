package deploy

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/completion"
)

// composeService is one service of a compose file.
type composeService struct {
	name string
	raw  map[string]any
}

func (s composeService) image() string { return digString(s.raw, "image") }

func (s composeService) command() []string {
	v, _ := dig(s.raw, "command")
	return stringList(v)
}

// env returns the service's environment, given as a mapping or as a list
// of KEY=VALUE.
func (s composeService) env() map[string]string {
	m := map[string]string{}
	switch e := s.raw["environment"].(type) {
	case map[string]any:
		for k, v := range e {
			m[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
			m[k] = v
		}
	}
	return m
}

// mount is a volume of a service: a bind mount (source a host path) or a
// named volume.
type mount struct {
	source, target string
	bind           bool
}

func (s composeService) mounts() []mount {
	var out []mount
	for _, v := range digList(s.raw, "volumes") {
		var m mount
		switch x := v.(type) {
		case string:
			parts := strings.Split(x, ":")
			if len(parts) < 2 {
				continue // an anonymous volume
			}
			m.source, m.target = parts[0], parts[1]
			m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/") || strings.HasPrefix(m.source, "~")
		case map[string]any:
			m.source, m.target = digString(x, "source"), digString(x, "target")
			m.bind = digString(x, "type") == "bind"
		}
		out = append(out, m)
	}
	return out
}

// secrets maps the service's secrets' container paths to their names.
func (s composeService) secrets() map[string]string {
	out := map[string]string{}
	for _, v := range digList(s.raw, "secrets") {
		switch x := v.(type) {
		case string:
			out["/run/secrets/"+x] = x
		case map[string]any:
			src, target := digString(x, "source"), digString(x, "target")
			if target == "" {
				target = src
			}
			if !strings.HasPrefix(target, "/") {
				target = "/run/secrets/" + target
			}
			out[target] = src
		}
	}
	return out
}

// dependsOn maps the services this one depends on to their conditions.
func (s composeService) dependsOn() map[string]string {
	out := map[string]string{}
	switch d := s.raw["depends_on"].(type) {
	case []any:
		for _, n := range d {
			out[fmt.Sprint(n)] = "service_started"
		}
	case map[string]any:
		for n, c := range d {
			cond := digString(c, "condition")
			if cond == "" {
				cond = "service_started"
			}
			out[n] = cond
		}
	}
	return out
}

// compose is a parsed compose file and the directory its relative paths
// start from.
type compose struct {
	dir      string
	raw      map[string]any
	services map[string]composeService
	names    []string // sorted
}

func loadCompose(dir string) (*compose, error) {
	p := filepath.Join(dir, "docker-compose.yaml")
	docs, err := yamlDocs(p)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: %d documents, want 1", p, len(docs))
	}
	raw, ok := docs[0].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: not a mapping", p)
	}
	c := &compose{dir: dir, raw: raw, services: map[string]composeService{}}
	for name, v := range digMap(raw, "services") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("service %s is not a mapping", name)
		}
		c.services[name] = composeService{name: name, raw: m}
		c.names = append(c.names, name)
	}
	slices.Sort(c.names)
	if len(c.names) == 0 {
		return nil, fmt.Errorf("%s: no services", p)
	}
	return c, nil
}

// hostPath resolves a path inside a service's container to the host file
// behind it: a secret or a bind mount (the deepest one containing it).
func (c *compose) hostPath(s composeService, containerPath string) (string, error) {
	if name, ok := s.secrets()[containerPath]; ok {
		file := digString(c.raw, "secrets", name, "file")
		if file == "" {
			return "", fmt.Errorf("secret %s has no file", name)
		}
		return filepath.Join(c.dir, file), nil
	}
	best := mount{}
	for _, m := range s.mounts() {
		if m.bind && (containerPath == m.target || strings.HasPrefix(containerPath, strings.TrimSuffix(m.target, "/")+"/")) &&
			len(m.target) > len(best.target) {
			best = m
		}
	}
	if best.target == "" {
		return "", fmt.Errorf("no secret or bind mount provides %s", containerPath)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(containerPath, best.target), "/")
	return filepath.Join(c.dir, best.source, rel), nil
}

func (c *compose) byImage(prefix string) []composeService {
	var out []composeService
	for _, n := range c.names {
		if strings.HasPrefix(c.services[n].image(), prefix) {
			out = append(out, c.services[n])
		}
	}
	return out
}

// isTurnd reports whether the service runs the image built from
// deploy/Dockerfile.
func isTurnd(s composeService) bool {
	return strings.HasSuffix(digString(s.raw, "build", "dockerfile"), "deploy/Dockerfile") ||
		strings.HasPrefix(s.image(), "turnd:")
}

func exists(p string) error {
	_, err := os.Stat(p)
	return err
}

// checkCompose returns the problems of the compose stack in dir.
func checkCompose(dir string, env turndEnv) []string {
	c, err := loadCompose(dir)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }

	for _, n := range c.names {
		s := c.services[n]
		if b, ok := s.raw["build"]; ok {
			ctx, dockerfile := digString(b, "context"), digString(b, "dockerfile")
			if str, ok := b.(string); ok {
				ctx = str
			}
			if dockerfile == "" {
				dockerfile = "Dockerfile"
			}
			if err := exists(filepath.Join(dir, ctx)); err != nil {
				bad("%s: build context: %v", n, err)
			} else if err := exists(filepath.Join(dir, ctx, dockerfile)); err != nil {
				bad("%s: dockerfile: %v", n, err)
			}
		} else if s.image() == "" {
			bad("%s: neither build nor image", n)
		}
		for _, m := range s.mounts() {
			if m.bind {
				if err := exists(filepath.Join(dir, m.source)); err != nil {
					bad("%s: volume %s: %v", n, m.source, err)
				}
			} else if _, ok := digMap(c.raw, "volumes")[m.source]; !ok {
				bad("%s: named volume %s is not declared under volumes", n, m.source)
			}
		}
		for _, name := range s.secrets() {
			if _, ok := digMap(c.raw, "secrets")[name]; !ok {
				bad("%s: secret %s is not declared under secrets", n, name)
			}
		}
		for _, f := range stringList(s.raw["env_file"]) {
			if err := exists(filepath.Join(dir, f)); err != nil {
				bad("%s: env_file: %v", n, err)
			}
		}
		for dep, cond := range s.dependsOn() {
			target, ok := c.services[dep]
			switch {
			case !ok:
				bad("%s: depends on %s, which is no service", n, dep)
			case cond == "service_healthy" && target.raw["healthcheck"] == nil:
				bad("%s: waits for %s to be healthy, which has no healthcheck", n, dep)
			case cond == "service_completed_successfully" && fmt.Sprint(target.raw["restart"]) != "no":
				bad("%s: waits for %s to complete, but %s restarts (restart: %v)", n, dep, dep, target.raw["restart"])
			case !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, cond):
				bad("%s: depends on %s with unknown condition %q", n, dep, cond)
			}
		}
		for _, p := range stringList(s.raw["ports"]) {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				bad("%s: port %s is published on every interface of the host", n, p)
			}
		}
	}
	for name := range digMap(c.raw, "secrets") {
		file := digString(c.raw, "secrets", name, "file")
		if file == "" {
			bad("secret %s: no file", name)
		} else if err := exists(filepath.Join(dir, file)); err != nil {
			bad("secret %s: %v", name, err)
		}
	}

	// turnd: one migrate, two or more replicas that leave the schema alone.
	var migrate string
	var replicas []composeService
	var dbURL string
	for _, n := range c.names {
		s := c.services[n]
		if !isTurnd(s) {
			continue
		}
		e := s.env()
		for k := range e {
			if err := env.check(k); err != nil {
				bad("%s: %v", n, err)
			}
		}
		read := func(name string) string {
			if v, ok := e[name]; ok {
				return v
			}
			p, ok := e[name+"_FILE"]
			if !ok {
				return ""
			}
			host, err := c.hostPath(s, p)
			if err != nil {
				bad("%s: %s_FILE: %v", n, name, err)
				return ""
			}
			data, err := os.ReadFile(host)
			if err != nil {
				bad("%s: %s_FILE: %v", n, name, err)
				return ""
			}
			return strings.TrimSpace(string(data))
		}
		for k, v := range e {
			if strings.HasSuffix(k, "_FILE") {
				read(strings.TrimSuffix(k, "_FILE"))
			} else if k == "TURND_CONFIG" {
				host, err := c.hostPath(s, v)
				if err != nil {
					bad("%s: TURND_CONFIG: %v", n, err)
					continue
				}
				reg, err := toolLoad(host, e)
				if err != nil {
					bad("%s: TURND_CONFIG: %v", n, err)
				} else {
					if _, ok := reg.Lookup("approval"); ok {
						bad("%s: TURND_CONFIG registers the demo approval tool, which is for the quick start only", n)
					}
					reg.CloseIdleConnections()
				}
			} else if k == "TURND_DEMO" {
				bad("%s: TURND_DEMO is set: demo mode logs completion keys", n)
			}
		}
		if sec := read("TURND_WEBHOOK_SIGNING_SECRET"); sec != "" {
			if _, err := completion.NewSigner(sec); err != nil {
				bad("%s: TURND_WEBHOOK_SIGNING_SECRET: %v", n, err)
			} else if !strings.HasPrefix(sec, completion.SigningSecretPrefix) {
				bad("%s: TURND_WEBHOOK_SIGNING_SECRET is not in the Standard Webhooks form %s<base64>: receivers using the official libraries cannot verify its signatures", n, completion.SigningSecretPrefix)
			}
		}
		u := read("DATABASE_URL")
		if u == "" {
			bad("%s: no DATABASE_URL: replicas would each use their own embedded store", n)
		} else if dbURL == "" {
			dbURL = u
		} else if u != dbURL {
			bad("%s: a DATABASE_URL other than the other turnd services'", n)
		}
		cmd := s.command()
		switch {
		case len(cmd) > 0 && cmd[0] == "migrate":
			if migrate != "" {
				bad("%s: a second migrate service besides %s", n, migrate)
			}
			migrate = n
		case len(cmd) == 0 || cmd[0] == "serve":
			replicas = append(replicas, s)
			noMigrate, _ := strconv.ParseBool(e["TURND_NO_MIGRATE"])
			if !noMigrate && !slices.Contains(cmd, "--no-migrate") {
				bad("%s: migrates at start; the migrate service owns the schema (TURND_NO_MIGRATE)", n)
			}
			addr := e["TURND_ADDR"]
			if host, _, err := net.SplitHostPort(addr); err != nil {
				bad("%s: TURND_ADDR %q: %v", n, addr, err)
			} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) && read("TURND_API_TOKENS") == "" {
				bad("%s: listens on %s without TURND_API_TOKENS: turnd refuses to start", n, addr)
			}
			grace := 30 * time.Second
			if g, ok := e["TURND_SHUTDOWN_GRACE"]; ok {
				if grace, err = time.ParseDuration(g); err != nil {
					bad("%s: TURND_SHUTDOWN_GRACE: %v", n, err)
				}
			}
			var delay time.Duration
			if d, ok := e["TURND_SHUTDOWN_DELAY"]; ok {
				if delay, err = time.ParseDuration(d); err != nil {
					bad("%s: TURND_SHUTDOWN_DELAY: %v", n, err)
				}
			}
			// The balancer must see /readyz fail (inter 2s, fall 2) before
			// the replica stops taking requests.
			if delay < 4*time.Second {
				bad("%s: TURND_SHUTDOWN_DELAY %s is shorter than the 4s HAProxy needs to see /readyz fail", n, delay)
			}
			stop, err := time.ParseDuration(digString(s.raw, "stop_grace_period"))
			if err != nil || stop <= delay+grace+5*time.Second {
				bad("%s: stop_grace_period %q must exceed TURND_SHUTDOWN_DELAY (%s) + TURND_SHUTDOWN_GRACE (%s) + 5s of HTTP drain", n, digString(s.raw, "stop_grace_period"), delay, grace)
			}
		default:
			bad("%s: unknown turnd command %q", n, cmd)
		}
	}
	if migrate == "" {
		bad("no service runs turnd migrate")
	}
	if len(replicas) < 2 {
		bad("%d turnd replicas, want at least 2", len(replicas))
	}
	var targets []string
	for _, r := range replicas {
		if migrate != "" && r.dependsOn()[migrate] != "service_completed_successfully" {
			bad("%s: does not wait for %s to complete", r.name, migrate)
		}
		if _, port, err := net.SplitHostPort(r.env()["TURND_ADDR"]); err == nil {
			targets = append(targets, r.name+":"+port)
		}
	}
	slices.Sort(targets)
	if migrate != "" {
		if len(c.services[migrate].dependsOn()) == 0 {
			bad("%s: runs without waiting for the database", migrate)
		}
		for dep, cond := range c.services[migrate].dependsOn() {
			if strings.HasPrefix(c.services[dep].image(), "postgres") && cond != "service_healthy" {
				bad("%s: starts before %s is healthy", migrate, dep)
			}
		}
	}
	problems = append(problems, checkDatabaseURL(c, dbURL)...)
	problems = append(problems, checkPrometheusTargets(c, targets)...)
	problems = append(problems, checkHAProxy(c, targets)...)
	problems = append(problems, checkGrafana(c)...)
	return problems
}

// checkDatabaseURL holds turnd's DATABASE_URL to the postgres service: its
// host, user, database and password.
func checkDatabaseURL(c *compose, dbURL string) []string {
	if dbURL == "" {
		return nil
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return []string{fmt.Sprintf("DATABASE_URL: %v", err)}
	}
	pg, ok := c.services[u.Hostname()]
	if !ok || !strings.HasPrefix(pg.image(), "postgres") {
		return []string{fmt.Sprintf("DATABASE_URL names host %s, which is no postgres service", u.Hostname())}
	}
	var problems []string
	e := pg.env()
	if want := e["POSTGRES_USER"]; u.User.Username() != want {
		problems = append(problems, fmt.Sprintf("DATABASE_URL user %q, POSTGRES_USER %q", u.User.Username(), want))
	}
	if want := e["POSTGRES_DB"]; strings.TrimPrefix(u.Path, "/") != want {
		problems = append(problems, fmt.Sprintf("DATABASE_URL database %q, POSTGRES_DB %q", u.Path, want))
	}
	want := e["POSTGRES_PASSWORD"]
	if p, ok := e["POSTGRES_PASSWORD_FILE"]; ok {
		host, err := c.hostPath(pg, p)
		if err != nil {
			return append(problems, fmt.Sprintf("%s: POSTGRES_PASSWORD_FILE: %v", pg.name, err))
		}
		data, err := os.ReadFile(host)
		if err != nil {
			return append(problems, fmt.Sprintf("%s: POSTGRES_PASSWORD_FILE: %v", pg.name, err))
		}
		want = strings.TrimSpace(string(data))
	}
	if got, _ := u.User.Password(); got != want {
		problems = append(problems, "the password in DATABASE_URL is not the postgres service's")
	}
	return problems
}

// checkPrometheusTargets holds the Prometheus service's turnd job to the
// replicas and its rule files to the files beside it.
func checkPrometheusTargets(c *compose, targets []string) []string {
	proms := c.byImage("prom/prometheus")
	if len(proms) != 1 {
		return []string{fmt.Sprintf("%d prometheus services, want 1", len(proms))}
	}
	p := proms[0]
	var cfgPath string
	for _, a := range p.command() {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			cfgPath = v
		}
	}
	if cfgPath == "" {
		return []string{"prometheus: no --config.file"}
	}
	host, err := c.hostPath(p, cfgPath)
	if err != nil {
		return []string{fmt.Sprintf("prometheus: config: %v", err)}
	}
	docs, err := yamlDocs(host)
	if err != nil || len(docs) != 1 {
		return []string{fmt.Sprintf("prometheus: config %s: %v", host, err)}
	}
	var problems []string
	for _, rf := range stringList(digList(docs[0], "rule_files")) {
		container := rf
		if !path.IsAbs(rf) {
			container = path.Join(path.Dir(cfgPath), rf)
		}
		if h, err := c.hostPath(p, container); err != nil {
			problems = append(problems, fmt.Sprintf("prometheus: rule file %s: %v", rf, err))
		} else if m, _ := filepath.Glob(h); len(m) == 0 {
			problems = append(problems, fmt.Sprintf("prometheus: rule file %s matches nothing (%s)", rf, h))
		}
	}
	var got []string
	found := false
	for _, sc := range digList(docs[0], "scrape_configs") {
		if digString(sc, "job_name") != "turnd" {
			continue
		}
		found = true
		if mp := digString(sc, "metrics_path"); mp != "" && mp != "/metrics" {
			problems = append(problems, fmt.Sprintf("prometheus: turnd metrics_path %s, turnd serves /metrics", mp))
		}
		for _, st := range digList(sc, "static_configs") {
			got = append(got, stringList(digList(st, "targets"))...)
		}
	}
	if !found {
		return append(problems, "prometheus: no scrape job named turnd (the rules and the dashboard select job=\"turnd\")")
	}
	slices.Sort(got)
	if !slices.Equal(got, targets) {
		problems = append(problems, fmt.Sprintf("prometheus scrapes %v, the turnd replicas are %v", got, targets))
	}
	return problems
}

// checkHAProxy holds the load balancer's servers to the replicas and its
// health check to /readyz.
func checkHAProxy(c *compose, targets []string) []string {
	lbs := c.byImage("haproxy")
	if len(lbs) != 1 {
		return []string{fmt.Sprintf("%d haproxy services, want 1", len(lbs))}
	}
	host, err := c.hostPath(lbs[0], "/usr/local/etc/haproxy/haproxy.cfg")
	if err != nil {
		return []string{fmt.Sprintf("haproxy: config: %v", err)}
	}
	f, err := os.Open(host)
	if err != nil {
		return []string{fmt.Sprintf("haproxy: %v", err)}
	}
	defer f.Close()
	var got []string
	readyz := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.Fields(strings.SplitN(sc.Text(), "#", 2)[0])
		switch {
		case len(line) >= 3 && line[0] == "server":
			got = append(got, line[2])
		case len(line) >= 4 && line[0] == "option" && line[1] == "httpchk" && line[3] == "/readyz":
			readyz = true
		}
	}
	var problems []string
	if !readyz {
		problems = append(problems, "haproxy: the health check does not ask /readyz: a draining replica keeps its traffic")
	}
	slices.Sort(got)
	if !slices.Equal(got, targets) {
		problems = append(problems, fmt.Sprintf("haproxy balances %v, the turnd replicas are %v", got, targets))
	}
	return problems
}

// checkGrafana holds Grafana's provisioning to the Prometheus service and to
// the dashboards mounted beside it.
func checkGrafana(c *compose) []string {
	gs := c.byImage("grafana/grafana")
	if len(gs) != 1 {
		return []string{fmt.Sprintf("%d grafana services, want 1", len(gs))}
	}
	g := gs[0]
	prov, err := c.hostPath(g, "/etc/grafana/provisioning")
	if err != nil {
		return []string{fmt.Sprintf("grafana: provisioning: %v", err)}
	}
	var problems []string
	proms := c.byImage("prom/prometheus")
	dsFiles, _ := filepath.Glob(filepath.Join(prov, "datasources", "*.yaml"))
	var dsCount int
	for _, f := range dsFiles {
		docs, err := yamlDocs(f)
		if err != nil || len(docs) != 1 {
			problems = append(problems, fmt.Sprintf("grafana: %s: %v", f, err))
			continue
		}
		for _, ds := range digList(docs[0], "datasources") {
			dsCount++
			u, err := url.Parse(digString(ds, "url"))
			if err != nil || len(proms) != 1 || u.Hostname() != proms[0].name || u.Port() != "9090" {
				problems = append(problems, fmt.Sprintf("grafana: datasource url %q is not the prometheus service on 9090", digString(ds, "url")))
			}
		}
	}
	if dsCount == 0 {
		problems = append(problems, "grafana: no datasource provisioned")
	}
	provFiles, _ := filepath.Glob(filepath.Join(prov, "dashboards", "*.yaml"))
	var dashboards int
	for _, f := range provFiles {
		docs, err := yamlDocs(f)
		if err != nil || len(docs) != 1 {
			problems = append(problems, fmt.Sprintf("grafana: %s: %v", f, err))
			continue
		}
		for _, p := range digList(docs[0], "providers") {
			dir, err := c.hostPath(g, digString(p, "options", "path"))
			if err != nil {
				problems = append(problems, fmt.Sprintf("grafana: dashboard provider %s: %v", digString(p, "name"), err))
				continue
			}
			js, _ := filepath.Glob(filepath.Join(dir, "*.json"))
			dashboards += len(js)
		}
	}
	if dashboards == 0 {
		problems = append(problems, "grafana: no dashboard JSON where the providers look")
	}
	if home, ok := g.env()["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; ok {
		if h, err := c.hostPath(g, home); err != nil {
			problems = append(problems, fmt.Sprintf("grafana: home dashboard: %v", err))
		} else if err := exists(h); err != nil {
			problems = append(problems, fmt.Sprintf("grafana: home dashboard: %v", err))
		}
	}
	return problems
}

func TestCompose(t *testing.T) {
	t.Parallel()
	for _, p := range checkCompose("compose", loadTurndEnv(t)) {
		t.Error(p)
	}
}

// composeFixture copies the compose stack and the files it refers to
// outside deploy/ into a temporary tree of the repository's shape, and
// returns its compose directory.
func composeFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	copyFile := func(src, dst string) {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir("compose", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		copyFile(p, filepath.Join(root, "deploy", p))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	copyFile("Dockerfile", filepath.Join(root, "deploy", "Dockerfile"))
	copyFile(filepath.Join(repoRoot, "examples", "turnd.yaml"), filepath.Join(root, "examples", "turnd.yaml"))
	return filepath.Join(root, "deploy", "compose")
}

func TestComposeFixture(t *testing.T) {
	t.Parallel()
	// The copy passes as the original does: the rejects below fail for
	// their edit alone.
	for _, p := range checkCompose(composeFixture(t), loadTurndEnv(t)) {
		t.Error(p)
	}
}

// TestComposeRejects breaks the copied stack one edit at a time; each
// break must be reported.
func TestComposeRejects(t *testing.T) {
	t.Parallel()
	env := loadTurndEnv(t)
	tests := []struct{ name, file, old, new, want string }{
		{"dockerfile moved", "docker-compose.yaml", "dockerfile: deploy/Dockerfile", "dockerfile: deploy/Containerfile", "dockerfile:"},
		{"build context", "docker-compose.yaml", "context: ../..", "context: ../../..nowhere", "build context"},
		{"tool config missing", "docker-compose.yaml", "./turnd.yaml:/etc", "./tools.yaml:/etc", "volume ./tools.yaml"},
		{"secret file missing", "docker-compose.yaml", "file: ./secrets/database_url", "file: ./secrets/database-url", "secret database_url"},
		{"undeclared secret", "docker-compose.yaml", "    - turnd_webhook_secret\n", "    - turnd_webhook_secrets\n", "secret turnd_webhook_secrets is not declared"},
		{"undeclared volume", "docker-compose.yaml", "- pgdata:/var/lib", "- pg:/var/lib", "named volume pg is not declared"},
		{"unknown env", "docker-compose.yaml", "TURND_LOG_FORMAT:", "TURND_LOGFORMAT:", "no environment variable TURND_LOGFORMAT"},
		{"replicas migrate", "docker-compose.yaml", `TURND_NO_MIGRATE: "true"`, `TURND_NO_MIGRATE: "false"`, "migrates at start"},
		{"no wait for migrate", "docker-compose.yaml", "      migrate:\n        condition: service_completed_successfully\n\n  turnd-2", "      migrate:\n        condition: service_started\n\n  turnd-2", "turnd-1: does not wait for migrate"},
		{"restarting one-shot", "docker-compose.yaml", `    restart: "no"`, `    restart: on-failure`, "but migrate restarts"},
		{"no healthcheck", "docker-compose.yaml", "    healthcheck:\n      test:", "    x-healthcheck:\n      test:", "which has no healthcheck"},
		{"short stop grace", "docker-compose.yaml", "stop_grace_period: 45s\n    depends_on", "stop_grace_period: 40s\n    depends_on", "must exceed TURND_SHUTDOWN_DELAY"},
		{"no shutdown delay", "docker-compose.yaml", "    TURND_SHUTDOWN_DELAY: 5s\n", "", "shorter than the 4s"},
		{"open port", "docker-compose.yaml", `"127.0.0.1:8080:8080"`, `"8080:8080"`, "published on every interface"},
		{"no tokens", "docker-compose.yaml", "    TURND_API_TOKENS_FILE: /run/secrets/turnd_api_tokens\n", "", "without TURND_API_TOKENS"},
		{"one replica", "docker-compose.yaml", "  turnd-2:\n    <<: *turnd\n", "  turnd-2:\n    image: busybox\n", "1 turnd replicas"},
		{"no migrate", "docker-compose.yaml", `command: ["migrate"]`, `command: ["serve"]`, "no service runs turnd migrate"},
		{"wrong db password", "secrets/postgres_password", "demo-postgres-password-change-me", "another-password", "password in DATABASE_URL"},
		{"wrong db host", "secrets/database_url", "@postgres:5432", "@db:5432", "names host db"},
		{"weak webhook secret", "secrets/turnd_webhook_secret", "whsec_wLwMJubpUOEp2Rj9U4qGjZgqILlDDku2ouBnk48g0bY=", "short", "TURND_WEBHOOK_SIGNING_SECRET"},
		{"raw webhook secret", "secrets/turnd_webhook_secret", "whsec_wLwMJubpUOEp2Rj9U4qGjZgqILlDDku2ouBnk48g0bY=", "demo-webhook-signing-secret-change-me-0123456789", "Standard Webhooks form"},
		{"bad tool config", "turnd.yaml", "builtin: [", "builtin: [nosuchtool, ", "TURND_CONFIG"},
		{"demo tool in a deployment", "turnd.yaml", "builtin: [", "builtin: [approval, ", "approval"},
		{"demo mode in a deployment", "docker-compose.yaml", "    TURND_LOG_FORMAT: json\n", "    TURND_LOG_FORMAT: json\n    TURND_DEMO: \"true\"\n", "TURND_DEMO"},
		{"unscraped replica", "prometheus/prometheus.yml", "          - turnd-2:8080\n", "", "prometheus scrapes"},
		{"no turnd job", "prometheus/prometheus.yml", "job_name: turnd", "job_name: api", "no scrape job named turnd"},
		{"missing rule file", "prometheus/prometheus.yml", "  - alerts.yml", "  - rules.yml", "rule file rules.yml"},
		{"lb port", "haproxy/haproxy.cfg", "server turnd-2 turnd-2:8080", "server turnd-2 turnd-2:9090", "haproxy balances"},
		{"lb health", "haproxy/haproxy.cfg", "option httpchk GET /readyz", "option httpchk GET /healthz", "does not ask /readyz"},
		{"datasource", "grafana/provisioning/datasources/prometheus.yaml", "http://prometheus:9090", "http://prometheus:9091", "datasource url"},
		{"dashboards path", "grafana/provisioning/dashboards/turnd.yaml", "path: /etc/grafana/dashboards", "path: /var/lib/grafana/dashboards", "dashboard provider turnd"},
		{"home dashboard", "docker-compose.yaml", "dashboards/turnd.json", "dashboards/home.json", "home dashboard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := composeFixture(t)
			p := filepath.Join(dir, tt.file)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tt.old) {
				t.Fatalf("%s no longer contains %q: update this case", tt.file, tt.old)
			}
			if err := os.WriteFile(p, []byte(strings.Replace(string(data), tt.old, tt.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			got := checkCompose(dir, env)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("problems %q, want one saying %q", got, tt.want)
			}
		})
	}
}

// TestHAProxyConfig has HAProxy validate its config where it is installed
// (Debian's haproxy package). The replicas' names resolve only inside the
// compose network; HAProxy warns about them and starts them disabled.
func TestHAProxyConfig(t *testing.T) {
	t.Parallel()
	p, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed: the load balancer's config is checked by the compose test only")
	}
	runTool(t, p, "-c", "-q", "-f", "compose/haproxy/haproxy.cfg")
}
