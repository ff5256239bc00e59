package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const kubernetesDir = "kubernetes"

// k8sObject is one document of a manifest file.
type k8sObject struct {
	file string
	raw  map[string]any
}

func (o k8sObject) kind() string { return digString(o.raw, "kind") }
func (o k8sObject) name() string { return digString(o.raw, "metadata", "name") }

// manifests holds the Kubernetes objects of a directory by kind.
type manifests struct {
	dir     string
	objects []k8sObject
	kust    map[string]any
}

func (m manifests) ofKind(kind string) []k8sObject {
	var out []k8sObject
	for _, o := range m.objects {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func loadManifests(dir string) (manifests, []string) {
	m := manifests{dir: dir}
	var problems []string
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		docs, err := yamlDocs(f)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		for i, d := range docs {
			raw, ok := d.(map[string]any)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: document %d is not a mapping", f, i+1))
				continue
			}
			if filepath.Base(f) == "kustomization.yaml" {
				m.kust = raw
				continue
			}
			o := k8sObject{file: filepath.Base(f), raw: raw}
			if digString(raw, "apiVersion") == "" || o.kind() == "" || o.name() == "" {
				problems = append(problems, fmt.Sprintf("%s: document %d lacks apiVersion, kind or metadata.name", f, i+1))
				continue
			}
			m.objects = append(m.objects, o)
		}
	}
	return m, problems
}

// selects reports whether every label of selector is in labels.
func selects(selector, labels map[string]any) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a probe's or Service's port (a number or a name)
// against a container's ports.
func containerPort(c any, port any) (int64, bool) {
	for _, p := range digList(c, "ports") {
		n, _ := digInt(p, "containerPort")
		switch x := port.(type) {
		case string:
			if digString(p, "name") == x {
				return n, true
			}
			if v, err := strconv.ParseInt(x, 10, 64); err == nil && v == n {
				return n, true
			}
		default:
			if v, ok := digInt(map[string]any{"p": x}, "p"); ok && v == n {
				return n, true
			}
		}
	}
	return 0, false
}

// containerEnv returns a container's literal env values.
func containerEnv(c any) map[string]string {
	out := map[string]string{}
	for _, e := range digList(c, "env") {
		out[digString(e, "name")] = digString(e, "value")
	}
	return out
}

// volumeSource returns the volume a container path lies in: its volume
// definition and the path inside it.
func volumeSource(pod, c any, p string) (map[string]any, string, bool) {
	var best map[string]any
	var bestPath, rest string
	for _, vm := range digList(c, "volumeMounts") {
		mp := digString(vm, "mountPath")
		if strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") && len(mp) > len(bestPath) {
			for _, v := range digList(pod, "volumes") {
				if vol, ok := v.(map[string]any); ok && digString(vol, "name") == digString(vm, "name") {
					best, bestPath, rest = vol, mp, strings.TrimPrefix(p, strings.TrimSuffix(mp, "/")+"/")
				}
			}
		}
	}
	return best, rest, best != nil
}

// checkKubernetes returns the problems of the manifests in dir. alerts is
// the compose stack's rules file, which the PrometheusRule must equal.
func checkKubernetes(dir string, env turndEnv, alerts any) []string {
	m, problems := loadManifests(dir)
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }

	one := func(kind string) (k8sObject, bool) {
		objs := m.ofKind(kind)
		if len(objs) != 1 {
			bad("%d %s objects, want 1", len(objs), kind)
			return k8sObject{}, false
		}
		return objs[0], true
	}
	dep, okDep := one("Deployment")
	job, okJob := one("Job")
	svc, okSvc := one("Service")
	pdb, okPDB := one("PodDisruptionBudget")
	sm, okSM := one("ServiceMonitor")
	rule, okRule := one("PrometheusRule")
	secret, okSecret := one("Secret")
	cm, okCM := one("ConfigMap")
	if !okDep || !okJob || !okSvc || !okPDB || !okSM || !okRule || !okSecret || !okCM {
		return problems
	}

	secretKeys := map[string]string{}
	for _, field := range []string{"stringData", "data"} {
		for k, v := range digMap(secret.raw, field) {
			secretKeys[k] = fmt.Sprint(v)
			if !strings.Contains(fmt.Sprint(v), "CHANGE-ME") {
				bad("%s: %s holds a value without CHANGE-ME: the example must hold placeholders only", secret.file, k)
			}
		}
	}

	// checkPod holds a pod template's security, secrets and config to turnd's.
	checkPod := func(o k8sObject, c any) {
		pod := digMap(o.raw, "spec", "template", "spec")
		where := o.file
		// The container's setting wins over the pod's.
		nonRoot, ok := dig(c, "securityContext", "runAsNonRoot")
		if !ok {
			nonRoot, _ = dig(pod, "securityContext", "runAsNonRoot")
		}
		if nonRoot != true {
			bad("%s: runAsNonRoot is not true", where)
		}
		if ro, _ := dig(c, "securityContext", "readOnlyRootFilesystem"); ro != true {
			bad("%s: readOnlyRootFilesystem is not true", where)
		}
		if pe, _ := dig(c, "securityContext", "allowPrivilegeEscalation"); pe != false {
			bad("%s: allowPrivilegeEscalation is not false", where)
		}
		if !slices.Contains(stringList(digList(c, "securityContext", "capabilities", "drop")), "ALL") {
			bad("%s: capabilities do not drop ALL", where)
		}
		if digString(c, "resources", "requests", "cpu") == "" || digString(c, "resources", "requests", "memory") == "" {
			bad("%s: no cpu and memory requests", where)
		}
		if digString(c, "resources", "limits", "memory") == "" {
			bad("%s: no memory limit", where)
		}
		e := containerEnv(c)
		for k, v := range e {
			if err := env.check(k); err != nil {
				bad("%s: %v", where, err)
			}
			if !strings.HasSuffix(k, "_FILE") && k != "TURND_CONFIG" {
				continue
			}
			vol, key, ok := volumeSource(pod, c, v)
			switch {
			case !ok:
				bad("%s: %s=%s is in no mounted volume", where, k, v)
			case strings.HasSuffix(k, "_FILE"):
				if digString(vol, "secret", "secretName") != secret.name() {
					bad("%s: %s=%s is not in the %s Secret's volume", where, k, v, secret.name())
				} else if _, ok := secretKeys[key]; !ok {
					bad("%s: %s=%s: the Secret has no key %s", where, k, v, key)
				}
			default: // TURND_CONFIG
				data, ok := digMap(cm.raw, "data")[key].(string)
				if digString(vol, "configMap", "name") != cm.name() || !ok {
					bad("%s: TURND_CONFIG=%s: no key %s in ConfigMap %s", where, v, key, cm.name())
					continue
				}
				tmp, err := os.MkdirTemp("", "turnd-tools")
				if err != nil {
					bad("%v", err)
					continue
				}
				p := filepath.Join(tmp, key)
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					bad("%v", err)
				} else if reg, err := toolLoad(p, e); err != nil {
					bad("%s: ConfigMap %s: %v", where, cm.name(), err)
				} else {
					reg.CloseIdleConnections()
				}
				os.RemoveAll(tmp)
			}
		}
		if e["DATABASE_URL"] == "" && e["DATABASE_URL_FILE"] == "" {
			bad("%s: no DATABASE_URL: each pod would use its own embedded store", where)
		}
	}

	// The Deployment.
	replicas, _ := digInt(dep.raw, "spec", "replicas")
	if replicas < 2 {
		bad("%s: %d replicas, want at least 2", dep.file, replicas)
	}
	podLabels := digMap(dep.raw, "spec", "template", "metadata", "labels")
	if !selects(digMap(dep.raw, "spec", "selector", "matchLabels"), podLabels) {
		bad("%s: the selector does not match the pod template's labels", dep.file)
	}
	ctrs := digList(dep.raw, "spec", "template", "spec", "containers")
	if len(ctrs) != 1 {
		bad("%s: %d containers, want 1", dep.file, len(ctrs))
		return problems
	}
	c := ctrs[0]
	image := digString(c, "image")
	if args := stringList(digList(c, "args")); len(args) == 0 || args[0] != "serve" {
		bad("%s: args %v, want serve", dep.file, args)
	}
	checkPod(dep, c)
	e := containerEnv(c)
	if nm, _ := strconv.ParseBool(e["TURND_NO_MIGRATE"]); !nm {
		bad("%s: replicas migrate at start; the Job owns the schema (TURND_NO_MIGRATE)", dep.file)
	}
	if digString(podLabels, "app.kubernetes.io/component") == "" {
		bad("%s: pods carry no component label to tell them from the Job's", dep.file)
	}
	var listen int64
	if _, port, ok := strings.Cut(e["TURND_ADDR"], ":"); !ok {
		bad("%s: TURND_ADDR %q: turnd would listen on loopback only", dep.file, e["TURND_ADDR"])
	} else {
		listen, _ = strconv.ParseInt(port, 10, 64)
		if _, ok := containerPort(c, listen); !ok {
			bad("%s: TURND_ADDR port %d is no containerPort", dep.file, listen)
		}
	}
	for _, probe := range []struct{ field, path string }{{"readinessProbe", "/readyz"}, {"livenessProbe", "/healthz"}} {
		if got := digString(c, probe.field, "httpGet", "path"); got != probe.path {
			bad("%s: %s path %q, want %s", dep.file, probe.field, got, probe.path)
		}
		pv, _ := dig(c, probe.field, "httpGet", "port")
		if n, ok := containerPort(c, pv); !ok || n != listen {
			bad("%s: %s port %v is not turnd's port %d", dep.file, probe.field, pv, listen)
		}
	}
	grace := 30 * time.Second
	if g, ok := e["TURND_SHUTDOWN_GRACE"]; ok {
		var err error
		if grace, err = time.ParseDuration(g); err != nil {
			bad("%s: TURND_SHUTDOWN_GRACE: %v", dep.file, err)
		}
	}
	// turnd's own delay defaults to 5s beyond loopback (cmd/turnd/config.go).
	delay := 5 * time.Second
	if d, ok := e["TURND_SHUTDOWN_DELAY"]; ok {
		var err error
		if delay, err = time.ParseDuration(d); err != nil {
			bad("%s: TURND_SHUTDOWN_DELAY: %v", dep.file, err)
		}
	}
	preStop, _ := digInt(c, "lifecycle", "preStop", "sleep", "seconds")
	term, ok := digInt(dep.raw, "spec", "template", "spec", "terminationGracePeriodSeconds")
	if need := time.Duration(preStop)*time.Second + delay + grace + 5*time.Second; !ok || time.Duration(term)*time.Second <= need {
		bad("%s: terminationGracePeriodSeconds %d must exceed the preStop sleep + TURND_SHUTDOWN_DELAY + TURND_SHUTDOWN_GRACE + 5s of HTTP drain (%s)", dep.file, term, need)
	}

	// The migration Job.
	jobCtrs := digList(job.raw, "spec", "template", "spec", "containers")
	if len(jobCtrs) != 1 {
		bad("%s: %d containers, want 1", job.file, len(jobCtrs))
	} else {
		jc := jobCtrs[0]
		if args := stringList(digList(jc, "args")); len(args) == 0 || args[0] != "migrate" {
			bad("%s: args %v: the migration Job does not run turnd migrate", job.file, args)
		}
		if digString(jc, "image") != image {
			bad("%s: image %q, the Deployment runs %q", job.file, digString(jc, "image"), image)
		}
		if rp := digString(job.raw, "spec", "template", "spec", "restartPolicy"); rp != "Never" && rp != "OnFailure" {
			bad("%s: restartPolicy %q", job.file, rp)
		}
		checkPod(job, jc)
	}
	jobLabels := digMap(job.raw, "spec", "template", "metadata", "labels")

	// The Service, the PodDisruptionBudget, the ServiceMonitor.
	sel := digMap(svc.raw, "spec", "selector")
	if !selects(sel, podLabels) {
		bad("%s: the selector selects no turnd pod", svc.file)
	}
	if selects(sel, jobLabels) {
		bad("%s: the selector selects the migration Job's pods too", svc.file)
	}
	var svcPorts []string
	for _, p := range digList(svc.raw, "spec", "ports") {
		svcPorts = append(svcPorts, digString(p, "name"))
		tp, _ := dig(p, "targetPort")
		if n, ok := containerPort(c, tp); !ok || n != listen {
			bad("%s: targetPort %v is not turnd's port %d", svc.file, tp, listen)
		}
	}
	if !selects(digMap(pdb.raw, "spec", "selector", "matchLabels"), podLabels) {
		bad("%s: the selector selects no turnd pod", pdb.file)
	}
	if selects(digMap(pdb.raw, "spec", "selector", "matchLabels"), jobLabels) {
		bad("%s: the selector selects the migration Job's pods too", pdb.file)
	}
	maxU, hasMax := digInt(pdb.raw, "spec", "maxUnavailable")
	minA, hasMin := digInt(pdb.raw, "spec", "minAvailable")
	switch {
	case hasMax == hasMin:
		bad("%s: set one of maxUnavailable and minAvailable (as a number)", pdb.file)
	case hasMax && (maxU < 1 || maxU >= replicas):
		bad("%s: maxUnavailable %d with %d replicas: a drain would either stall or take every replica", pdb.file, maxU, replicas)
	case hasMin && (minA < 1 || minA >= replicas):
		bad("%s: minAvailable %d with %d replicas: a drain would either stall or take every replica", pdb.file, minA, replicas)
	}
	if !selects(digMap(sm.raw, "spec", "selector", "matchLabels"), digMap(svc.raw, "metadata", "labels")) {
		bad("%s: the selector does not select the %s Service's labels", sm.file, svc.name())
	}
	eps := digList(sm.raw, "spec", "endpoints")
	if len(eps) == 0 {
		bad("%s: no endpoints", sm.file)
	}
	for _, ep := range eps {
		if !slices.Contains(svcPorts, digString(ep, "port")) {
			bad("%s: endpoint port %q is no port name of the Service (%v)", sm.file, digString(ep, "port"), svcPorts)
		}
		if p := digString(ep, "path"); p != "" && p != "/metrics" {
			bad("%s: path %s, turnd serves /metrics", sm.file, p)
		}
	}
	if svc.name() != "turnd" && digString(sm.raw, "spec", "jobLabel") == "" {
		bad("%s: the job label would be %q; the rules and the dashboard select job=\"turnd\"", sm.file, svc.name())
	}
	got, _ := dig(rule.raw, "spec", "groups")
	want, _ := dig(alerts, "groups")
	if !reflect.DeepEqual(got, want) {
		bad("%s: spec.groups differs from %s: edit both together", rule.file, alertRules)
	}

	// The kustomization lists every manifest but the Secret example.
	if m.kust == nil {
		bad("no kustomization.yaml")
		return problems
	}
	listed := stringList(digList(m.kust, "resources"))
	for _, r := range listed {
		if err := exists(filepath.Join(dir, r)); err != nil {
			bad("kustomization.yaml: resource %s: %v", r, err)
		}
	}
	files := map[string]bool{}
	for _, o := range m.objects {
		files[o.file] = true
	}
	for f := range files {
		if f != secret.file && !slices.Contains(listed, f) {
			bad("kustomization.yaml does not list %s", f)
		}
	}
	if slices.Contains(listed, secret.file) {
		bad("kustomization.yaml lists %s: applying it would overwrite the real Secret with placeholders", secret.file)
	}
	for _, img := range digList(m.kust, "images") {
		if digString(img, "name") != image {
			bad("kustomization.yaml: image %q is not the Deployment's %q", digString(img, "name"), image)
		}
	}
	return problems
}

func TestKubernetes(t *testing.T) {
	t.Parallel()
	for _, p := range checkKubernetes(kubernetesDir, loadTurndEnv(t), yamlFile(t, alertRules)) {
		t.Error(p)
	}
}

// TestKubernetesRejects breaks a copy of the manifests one edit at a time.
func TestKubernetesRejects(t *testing.T) {
	t.Parallel()
	env, alerts := loadTurndEnv(t), yamlFile(t, alertRules)
	tests := []struct{ name, file, old, new, want string }{
		{"readiness path", "deployment.yaml", "path: /readyz", "path: /healthz", "readinessProbe path \"/healthz\""},
		{"liveness port", "deployment.yaml", "path: /healthz\n              port: http", "path: /healthz\n              port: 9090", "livenessProbe port 9090"},
		{"container port", "deployment.yaml", "containerPort: 8080", "containerPort: 9090", "TURND_ADDR port 8080 is no containerPort"},
		{"short termination grace", "deployment.yaml", "terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 35", "must exceed the preStop sleep"},
		{"longer shutdown grace", "deployment.yaml", "value: 30s", "value: 60s", "must exceed the preStop sleep"},
		{"writable root", "deployment.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem is not true"},
		{"root allowed", "job-migrate.yaml", "runAsNonRoot: true\n            capabilities", "runAsNonRoot: false\n            capabilities", "job-migrate.yaml: runAsNonRoot"},
		{"escalation", "deployment.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation"},
		{"no memory limit", "deployment.yaml", "              memory: 512Mi\n", "", "no memory limit"},
		{"one replica", "deployment.yaml", "replicas: 2", "replicas: 1", "1 replicas"},
		{"migrating replicas", "deployment.yaml", "name: TURND_NO_MIGRATE\n              value: \"true\"", "name: TURND_NO_MIGRATE\n              value: \"false\"", "replicas migrate at start"},
		{"unknown env", "deployment.yaml", "name: TURND_PUBLIC_URL", "name: TURND_PUBLIC_ADDR", "no environment variable TURND_PUBLIC_ADDR"},
		{"secret key", "deployment.yaml", "value: /run/secrets/turnd/api-tokens", "value: /run/secrets/turnd/api_tokens", "the Secret has no key api_tokens"},
		{"unmounted file", "job-migrate.yaml", "value: /run/secrets/turnd/database-url", "value: /var/run/database-url", "is in no mounted volume"},
		{"config key", "deployment.yaml", "value: /etc/turnd/turnd.yaml", "value: /etc/turnd/tools.yaml", "no key tools.yaml in ConfigMap"},
		{"bad tool config", "configmap.yaml", "builtin: [echo, sleep, now]", "builtin: [echo, sleep, later]", "ConfigMap turnd-tools"},
		{"real secret", "secret.example.yaml", "api-tokens: CHANGE-ME-token-one-of-32-or-more-characters,CHANGE-ME-token-two-of-32-or-more-characters", "api-tokens: 9f8e7d6c5b4a", "without CHANGE-ME"},
		{"job runs serve", "job-migrate.yaml", `args: ["migrate"]`, `args: ["serve"]`, "does not run turnd migrate"},
		{"job image", "job-migrate.yaml", "image: turnd #", "image: turnd-migrate #", "the Deployment runs"},
		{"service selects nothing", "service.yaml", "app.kubernetes.io/component: server", "app.kubernetes.io/component: api", "service.yaml: the selector selects no turnd pod"},
		{"service selects the job", "service.yaml", "    app.kubernetes.io/component: server\n", "", "selects the migration Job's pods too"},
		{"service target port", "service.yaml", "targetPort: http", "targetPort: metrics", "targetPort metrics"},
		{"pdb takes all", "pdb.yaml", "maxUnavailable: 1", "maxUnavailable: 2", "maxUnavailable 2 with 2 replicas"},
		{"pdb selector", "pdb.yaml", "app.kubernetes.io/name: turnd", "app.kubernetes.io/name: turn", "pdb.yaml: the selector selects no turnd pod"},
		{"monitor port", "servicemonitor.yaml", "- port: http", "- port: metrics", "endpoint port \"metrics\""},
		{"monitor selector", "servicemonitor.yaml", "    matchLabels:\n      app.kubernetes.io/name: turnd", "    matchLabels:\n      app: turnd", "does not select the turnd Service"},
		{"rules drift", "prometheusrule.yaml", "for: 2m", "for: 3m", "differs from"},
		{"unlisted manifest", "kustomization.yaml", "  - pdb.yaml\n", "", "does not list pdb.yaml"},
		{"missing resource", "kustomization.yaml", "  - pdb.yaml\n", "  - pdb.yaml\n  - ingress.yaml\n", "resource ingress.yaml"},
		{"secret listed", "kustomization.yaml", "  - pdb.yaml\n", "  - pdb.yaml\n  - secret.example.yaml\n", "overwrite the real Secret"},
		{"image name", "kustomization.yaml", "  - name: turnd\n", "  - name: turnd-server\n", "is not the Deployment's"},
		{"no kind", "pdb.yaml", "kind: PodDisruptionBudget\n", "", "lacks apiVersion, kind or metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files, _ := filepath.Glob(filepath.Join(kubernetesDir, "*"))
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if filepath.Base(f) == tt.file {
					if !strings.Contains(string(data), tt.old) {
						t.Fatalf("%s no longer contains %q: update this case", tt.file, tt.old)
					}
					data = []byte(strings.Replace(string(data), tt.old, tt.new, 1))
				}
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := checkKubernetes(dir, env, alerts)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("problems %q, want one saying %q", got, tt.want)
			}
		})
	}
}
