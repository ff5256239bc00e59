package deploy

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
	line int
}

// stage is the instructions from one FROM to the next.
type stage struct {
	image, name string
	from        instruction
	body        []instruction
}

// parseDockerfile reads instructions: comments and blank lines are
// dropped, lines ending in a backslash continue on the next.
func parseDockerfile(src string) ([]instruction, error) {
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(body)
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: the last instruction ends in a line continuation", start)
	}
	if len(out) == 0 {
		return nil, errors.New("no instructions")
	}
	return out, nil
}

// stages splits instructions at FROM; instructions before the first FROM
// may only be ARG.
func stages(ins []instruction) ([]stage, error) {
	var out []stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--") })
			st := stage{from: in}
			switch {
			case len(f) == 1:
				st.image = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.image, st.name = f[0], f[2]
			default:
				return nil, fmt.Errorf("line %d: FROM %s: want IMAGE [AS NAME]", in.line, in.args)
			}
			out = append(out, st)
			continue
		}
		if len(out) == 0 {
			if in.cmd != "ARG" {
				return nil, fmt.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
			}
			continue
		}
		out[len(out)-1].body = append(out[len(out)-1].body, in)
	}
	if len(out) == 0 {
		return nil, errors.New("no FROM")
	}
	return out, nil
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// declared reports whether name is an ARG or ENV of the stage.
func (s stage) declared(name string) bool {
	for _, in := range s.body {
		if in.cmd != "ARG" && in.cmd != "ENV" {
			continue
		}
		for _, f := range strings.Fields(in.args) {
			k, _, _ := strings.Cut(f, "=")
			if k == name {
				return true
			}
		}
	}
	return false
}

// env returns the stage's ENV KEY=VALUE pairs.
func (s stage) env() map[string]string {
	m := map[string]string{}
	for _, in := range s.all("ENV") {
		for _, f := range strings.Fields(in.args) {
			if k, v, ok := strings.Cut(f, "="); ok {
				m[k] = strings.Trim(v, `"`)
			}
		}
	}
	return m
}

var (
	braced      = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	ldflagX     = regexp.MustCompile(`-X\s+([\w./-]+)\.(\w+)=`)
	goBuildOut  = regexp.MustCompile(`go build .*-o\s+(\S+)\s+(\S+)`)
	copyFrom    = regexp.MustCompile(`--from=(\S+)`)
	goDirective = regexp.MustCompile(`(?m)^go\s+(\d+\.\d+)`)
)

// checkDockerfile returns the problems of a Dockerfile for turnd.
func checkDockerfile(src string, mainVars []string, goVersion string, env turndEnv) []string {
	ins, err := parseDockerfile(src)
	if err != nil {
		return []string{err.Error()}
	}
	sts, err := stages(ins)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	bad := func(in instruction, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("line %d: %s", in.line, fmt.Sprintf(format, a...)))
	}
	if len(sts) < 2 {
		problems = append(problems, "a single stage: the build toolchain would ship in the image")
	}

	// The Go version of the build image matches go.mod's.
	for _, in := range ins {
		if in.cmd == "ARG" && strings.HasPrefix(in.args, "GO_VERSION=") {
			if v := strings.TrimPrefix(in.args, "GO_VERSION="); v != goVersion {
				bad(in, "GO_VERSION=%s, go.mod says go %s", v, goVersion)
			}
		}
	}

	var built, builtPkg string
	names := map[string]bool{}
	for _, st := range sts {
		for _, in := range st.body {
			for _, m := range copyFrom.FindAllStringSubmatch(in.args, -1) {
				if in.cmd == "COPY" && !names[m[1]] {
					bad(in, "COPY --from=%s: no earlier stage of that name", m[1])
				}
			}
			if in.cmd == "RUN" || in.cmd == "LABEL" {
				for _, m := range braced.FindAllStringSubmatch(in.args, -1) {
					if !st.declared(m[1]) {
						bad(in, "${%s} is not an ARG or ENV of this stage (ARGs must be declared again after FROM)", m[1])
					}
				}
			}
			if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
				if !strings.Contains(in.args, "CGO_ENABLED=0") {
					bad(in, "go build without CGO_ENABLED=0: the binary would link libc")
				}
				m := goBuildOut.FindStringSubmatch(in.args)
				if m == nil {
					bad(in, "go build without -o OUTPUT PACKAGE")
				} else {
					built, builtPkg = m[1], m[2]
				}
				xs := ldflagX.FindAllStringSubmatch(in.args, -1)
				if len(xs) == 0 {
					bad(in, "go build sets no version with -ldflags -X")
				}
				for _, x := range xs {
					if x[1] != "main" || !slices.Contains(mainVars, x[2]) {
						bad(in, "-X %s.%s: cmd/turnd has no package-level string variable %s (the linker ignores it)", x[1], x[2], x[2])
					}
				}
			}
		}
		if st.name != "" {
			names[st.name] = true
		}
	}
	if builtPkg == "" {
		problems = append(problems, "no stage runs go build")
	} else if fi, err := os.Stat(filepath.Join(repoRoot, builtPkg)); err != nil || !fi.IsDir() {
		problems = append(problems, fmt.Sprintf("go build %s: no such package directory", builtPkg))
	}

	final := sts[len(sts)-1]
	if !strings.HasPrefix(final.image, "gcr.io/distroless/static") && final.image != "scratch" {
		bad(final.from, "final image %s: want distroless static or scratch", final.image)
	}
	users := final.all("USER")
	if len(users) == 0 {
		bad(final.from, "the final stage sets no USER: the image would run as root")
	} else {
		u := users[len(users)-1]
		name, _, _ := strings.Cut(u.args, ":")
		if name == "" || name == "root" || name == "0" {
			bad(u, "USER %s runs as root", u.args)
		}
	}
	for _, h := range final.all("HEALTHCHECK") {
		if !strings.EqualFold(h.args, "NONE") {
			bad(h, "HEALTHCHECK in an image without a shell or curl")
		}
	}
	var entry []string
	for _, e := range final.all("ENTRYPOINT") {
		if err := json.Unmarshal([]byte(e.args), &entry); err != nil {
			bad(e, "ENTRYPOINT not in exec form: there is no shell to run it")
		}
	}
	var copied bool
	for _, c := range final.all("COPY") {
		f := strings.Fields(c.args)
		f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--") })
		if len(f) == 2 && f[0] == built {
			copied = true
			if len(entry) == 0 || entry[0] != f[1] {
				bad(c, "the binary is copied to %s but ENTRYPOINT is %q", f[1], entry)
			}
		}
	}
	if built != "" && !copied {
		bad(final.from, "the final stage does not copy the built binary %s", built)
	}
	fenv := final.env()
	for k := range fenv {
		if err := env.check(k); err != nil {
			bad(final.from, "ENV: %v", err)
		}
	}
	var exposed []string
	for _, e := range final.all("EXPOSE") {
		exposed = append(exposed, strings.Fields(e.args)...)
	}
	if addr, ok := fenv["TURND_ADDR"]; !ok {
		bad(final.from, "the final stage does not set TURND_ADDR: turnd would listen on loopback only")
	} else if _, port, _ := strings.Cut(addr, ":"); !slices.Contains(exposed, port) && !slices.Contains(exposed, port+"/tcp") {
		bad(final.from, "TURND_ADDR=%s but EXPOSE %v", addr, exposed)
	}
	return problems
}

// mainStringVars returns the package-level string variables of cmd/turnd,
// the targets -ldflags -X can set.
func mainStringVars(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repoRoot, "cmd", "turnd", "*.go"))
	fset := token.NewFileSet()
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" {
						out = append(out, n.Name)
					} else if vs.Type == nil && i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	if !slices.Contains(out, "version") {
		t.Fatalf("cmd/turnd has no string variable version (found %v)", out)
	}
	return out
}

func goModVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := goDirective.FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkDockerfile(string(src), mainStringVars(t), goModVersion(t), loadTurndEnv(t)) {
		t.Errorf("Dockerfile: %s", p)
	}
}

// TestDockerfileRejects feeds checkDockerfile broken variants of the real
// Dockerfile: each must be reported.
func TestDockerfileRejects(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	vars, goVersion, env := mainStringVars(t), goModVersion(t), loadTurndEnv(t)
	tests := []struct{ name, old, new, want string }{
		{"root user", "USER 65532:65532", "USER root", "runs as root"},
		{"uid 0", "USER 65532:65532", "USER 0:0", "runs as root"},
		{"no user", "USER 65532:65532", "", "sets no USER"},
		{"cgo", "CGO_ENABLED=0 GOOS", "GOOS", "without CGO_ENABLED=0"},
		{"ldflags target", "-X main.version=", "-X main.versoin=", "no package-level string variable versoin"},
		{"undeclared arg", "ARG VERSION=dev\nARG COMMIT=unknown\nRUN", "ARG COMMIT=unknown\nRUN", "${VERSION} is not an ARG"},
		{"copy from nowhere", "COPY --from=build /out/turnd", "COPY --from=builder /out/turnd", "no earlier stage"},
		{"shell entrypoint", `ENTRYPOINT ["/usr/local/bin/turnd"]`, "ENTRYPOINT /usr/local/bin/turnd", "not in exec form"},
		{"entrypoint elsewhere", `ENTRYPOINT ["/usr/local/bin/turnd"]`, `ENTRYPOINT ["/turnd"]`, "ENTRYPOINT is"},
		{"fat final image", "FROM gcr.io/distroless/static-debian12:nonroot", "FROM debian:bookworm", "want distroless static or scratch"},
		{"port mismatch", "EXPOSE 8080", "EXPOSE 9090", "but EXPOSE"},
		{"loopback", "ENV TURND_ADDR=:8080 \\\n", "ENV ", "does not set TURND_ADDR"},
		{"unknown env", "TURND_DATA=", "TURND_DATADIR=", "no environment variable TURND_DATADIR"},
		{"healthcheck", "ENTRYPOINT [", "HEALTHCHECK CMD wget -q localhost:8080/healthz\nENTRYPOINT [", "HEALTHCHECK in an image"},
		{"go version", "ARG GO_VERSION=" + goVersion, "ARG GO_VERSION=1.20", "go.mod says"},
		{"missing package", "./cmd/turnd\n", "./cmd/turnctl\n", "no such package"},
		{"dangling continuation", "CMD [\"serve\"]", "CMD [\"serve\"] \\", "line continuation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(src, tt.old) {
				t.Fatalf("the Dockerfile no longer contains %q: update this case", tt.old)
			}
			got := checkDockerfile(strings.Replace(src, tt.old, tt.new, 1), vars, goVersion, env)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("problems %q, want one saying %q", got, tt.want)
			}
		})
	}
}

// ignoreRule is one .dockerignore pattern.
type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// parseDockerignore reads .dockerignore patterns: *, ? and ** globs,
// ! exceptions, the last matching pattern deciding.
func parseDockerignore(src string) []ignoreRule {
	var rules []ignoreRule
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			r.negate, line = true, rest
		}
		line = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(line)), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		r.re = regexp.MustCompile(re.String())
		rules = append(rules, r)
	}
	return rules
}

// ignored reports whether the build context leaves out path (slash
// separated, relative to the context): a pattern matches the path or one of
// its parent directories.
func ignored(rules []ignoreRule, path string) bool {
	out := false
	for _, r := range rules {
		for p := path; p != "."; p = filepath.ToSlash(filepath.Dir(p)) {
			if r.re.MatchString(p) {
				out = !r.negate
				break
			}
		}
	}
	return out
}

func TestDockerignoreMatching(t *testing.T) {
	t.Parallel()
	rules := parseDockerignore("# c\n.git\n/bin\n**/*_test.go\n**/testdata\n*.md\n!KEEP.md\ndocs/*.txt\n")
	for path, want := range map[string]bool{
		".git/config":            true,
		"bin/turnd":              true,
		"cmd/bin/x.go":           false,
		"api/server_test.go":     true,
		"server_test.go":         true,
		"api/server.go":          false,
		"tool/testdata/a.yaml":   true,
		"README.md":              true,
		"KEEP.md":                false,
		"api/README.md":          false, // *.md is anchored at the root
		"docs/a.txt":             true,
		"docs/sub/a.txt":         false,
		"go.mod":                 false,
		"migrations/0001.sql":    false,
		".github/workflows/x.md": false,
	} {
		if got := ignored(rules, path); got != want {
			t.Errorf("ignored(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestBuildContext checks that .dockerignore keeps every file the image's
// `go build ./cmd/turnd` needs (go.mod, go.sum, the Go and embedded files of
// every package of the module it builds) and leaves out .git, and that the
// build needs no cgo.
func TestBuildContext(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	rules := parseDockerignore(string(src))
	cmd := exec.Command("go", "list", "-deps", "-json", "./cmd/turnd")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("CGO_ENABLED=0 go list -deps ./cmd/turnd: %v", err)
	}
	type pkg struct {
		ImportPath, Dir     string
		GoFiles, EmbedFiles []string
		Module              *struct{ Path, Dir string }
		Error               *struct{ Err string }
		DepsErrors          []struct{ Err string }
	}
	needed := []string{"go.mod", "go.sum"}
	var deps []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		deps = append(deps, p.ImportPath)
		if p.Error != nil {
			t.Errorf("%s without cgo: %s", p.ImportPath, p.Error.Err)
		}
		if p.Module == nil || p.Module.Path != "github.com/turnd/turnd" {
			continue
		}
		rel, err := filepath.Rel(p.Module.Dir, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(needed) < 10 {
		t.Fatalf("only %d files needed by the build: the go list output was not read", len(needed))
	}
	for _, f := range needed {
		if ignored(rules, f) {
			t.Errorf(".dockerignore leaves out %s, which the image's build needs", f)
		}
	}
	if !ignored(rules, ".git/HEAD") {
		t.Error(".dockerignore sends .git into the build context")
	}
	if !slices.Contains(deps, "modernc.org/sqlite") {
		t.Error("cmd/turnd no longer uses modernc.org/sqlite: check that the embedded store still builds without cgo")
	}
	for _, d := range deps {
		if d == "runtime/cgo" || strings.HasPrefix(d, "github.com/mattn/go-sqlite3") {
			t.Errorf("cmd/turnd depends on %s, which needs cgo", d)
		}
	}
}
