package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnd/turnd/internal/loadtest"
)

// Baseline clients: who runs the PostgreSQL INSERT baseline.
const (
	// BaselineClientAuto is pgbench when it is found, else BaselineClientGo.
	BaselineClientAuto = "auto"
	// BaselineClientPgbench runs PostgreSQL's own pgbench: a client in C
	// that multiplexes its connections on a few threads, the leanest
	// there is, so that the baseline is what the database sustains rather
	// than what a client can drive.
	BaselineClientPgbench = "pgbench"
	// BaselineClientGo runs a loop in the bench's process (pgx, a
	// goroutine per connection). On a 2-core machine it reached 0.73–0.93
	// of pgbench's rate: a weaker baseline, and a flattering ratio.
	BaselineClientGo = "go"
)

// PgbenchPath returns the pgbench beside the PostgreSQL server binaries
// (of their version), else the one on the PATH; ok is false when there is
// none.
func PgbenchPath() (string, bool) {
	if dir, ok := PostgresBinDir(); ok {
		p := filepath.Join(dir, "pgbench")
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, true
	}
	return "", false
}

// PgbenchBaseline is the rate of single-row INSERT transactions the
// PostgreSQL at dbURL sustains from clients connections of pgbench (bin)
// for d, rounded up to whole seconds (pgbench counts its duration in
// seconds). Each transaction is one prepared
//
//	INSERT INTO <scratch>.bench_insert (v) VALUES ('client row')
//
// into table, the table of a scratch schema (loadtest.ScratchTable) made by
// the caller, or with table "" one of its own, created and dropped; as the
// Go loop's. pgbench runs one thread per CPU (at most one per client) and
// logs every transaction's latency into dir, from which the percentiles
// come.
func PgbenchBaseline(ctx context.Context, bin, dbURL, dir, table string, clients int, d time.Duration) (loadtest.Result, error) {
	if clients < 1 {
		return loadtest.Result{}, fmt.Errorf("pgbench baseline: clients %d: must be at least 1", clients)
	}
	if table == "" {
		t, drop, err := loadtest.ScratchTable(ctx, dbURL, loadtest.ScratchName())
		if err != nil {
			return loadtest.Result{}, fmt.Errorf("pgbench baseline: %w", err)
		}
		defer drop()
		table = t
	}

	work, err := os.MkdirTemp(dir, "pgbench-")
	if err != nil {
		return loadtest.Result{}, fmt.Errorf("pgbench baseline: %w", err)
	}
	defer os.RemoveAll(work)
	script := filepath.Join(work, "insert.sql")
	if err := os.WriteFile(script, []byte("INSERT INTO "+table+" (v) VALUES ('client row');\n"), 0o644); err != nil {
		return loadtest.Result{}, fmt.Errorf("pgbench baseline: %w", err)
	}
	conn, password, err := libpqURL(dbURL)
	if err != nil {
		return loadtest.Result{}, fmt.Errorf("pgbench baseline: %w", err)
	}
	secs := int(pgbenchDuration(d) / time.Second)
	threads := min(clients, runtime.NumCPU())
	cmd := exec.CommandContext(ctx, bin, "--no-vacuum", "--protocol=prepared",
		"--client="+strconv.Itoa(clients), "--jobs="+strconv.Itoa(threads), "--time="+strconv.Itoa(secs),
		"--file="+script, "--log", "--log-prefix="+filepath.Join(work, "log"), conn)
	cmd.Dir = work
	if password != "" {
		// Not on the command line, where ps shows it to everyone.
		cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	}
	// The measured window (see loadtest.WithWindow) is pgbench's run,
	// its connections' start included.
	closeWindow := loadtest.OpenWindow(ctx)
	out, err := cmd.CombinedOutput()
	closeWindow()
	if err != nil {
		return loadtest.Result{}, fmt.Errorf("pgbench baseline: %s: %w\n%s", bin, err, tail(out, 2000))
	}
	s, err := parsePgbench(out)
	if err != nil {
		return loadtest.Result{}, fmt.Errorf("pgbench baseline: %w\n%s", err, tail(out, 2000))
	}
	lat, err := pgbenchLatencies(work)
	if err != nil {
		return loadtest.Result{}, fmt.Errorf("pgbench baseline: %w", err)
	}
	if len(lat) != s.ok {
		return loadtest.Result{}, fmt.Errorf("pgbench baseline: its logs hold %d transactions, its summary %d", len(lat), s.ok)
	}
	return loadtest.Summarize(lat, s.failed, s.elapsed()), nil
}

// pgbenchDuration is how long pgbench runs when asked for d: whole
// seconds, at least one.
func pgbenchDuration(d time.Duration) time.Duration {
	return max(time.Second, time.Duration(math.Ceil(d.Seconds()))*time.Second)
}

// libpqKeywords are the connection parameters libpq takes in a URI's
// query (up to PostgreSQL 18); libpq refuses any other.
var libpqKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "password": true,
	"passfile": true, "require_auth": true, "channel_binding": true, "connect_timeout": true,
	"client_encoding": true, "options": true, "application_name": true, "fallback_application_name": true,
	"keepalives": true, "keepalives_idle": true, "keepalives_interval": true, "keepalives_count": true,
	"tcp_user_timeout": true, "replication": true, "gssencmode": true, "sslmode": true, "sslnegotiation": true,
	"requiressl": true, "sslcompression": true, "sslcert": true, "sslkey": true, "sslkeylogfile": true,
	"sslpassword": true, "sslcertmode": true, "sslrootcert": true, "sslcrl": true, "sslcrldir": true,
	"sslsni": true, "requirepeer": true, "ssl_min_protocol_version": true, "ssl_max_protocol_version": true,
	"min_protocol_version": true, "max_protocol_version": true, "krbsrvname": true, "gsslib": true,
	"gssdelegation": true, "scram_client_key": true, "scram_server_key": true, "service": true,
	"servicefile": true, "target_session_attrs": true, "load_balance_hosts": true,
	"oauth_issuer": true, "oauth_client_id": true, "oauth_client_secret": true, "oauth_scope": true,
}

// libpqURL rewrites a PostgreSQL URL that pgx accepts into one that libpq
// (pgbench) accepts, and takes its password out (for PGPASSWORD, off the
// command line): the parameters that are not libpq's move into options as
// -c settings when pgx sends them to the server at connect (search_path,
// say), and go when they are pgx's own (pool_max_conns, say): pgx's
// parser tells which. A keyword/value connection string is left as it is.
func libpqURL(dbURL string) (conn, password string, err error) {
	if !strings.HasPrefix(dbURL, "postgres://") && !strings.HasPrefix(dbURL, "postgresql://") {
		return dbURL, "", nil
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", "", fmt.Errorf("database URL: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return "", "", errors.New("database URL: pgx cannot parse it")
	}
	serverSettings := cfg.ConnConfig.RuntimeParams
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			password = p
			u.User = url.User(u.User.Username())
		}
	}
	q := u.Query()
	if p := q.Get("password"); p != "" {
		password = p
	}
	q.Del("password")
	var settings []string
	for k, vs := range q {
		if libpqKeywords[k] {
			continue
		}
		if _, setting := serverSettings[k]; setting {
			for _, v := range vs {
				// In options, a space separates settings; a backslash
				// escapes one.
				v = strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), " ", `\ `)
				settings = append(settings, "-c "+k+"="+v)
			}
		}
		q.Del(k)
	}
	slices.Sort(settings)
	if len(settings) > 0 {
		if o := q.Get("options"); o != "" {
			settings = append([]string{o}, settings...)
		}
		q.Set("options", strings.Join(settings, " "))
	}
	// libpq decodes %XX only: a space must not be written as '+' (Encode
	// writes a '+' of the value as %2B, so every '+' it writes is a space).
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String(), password, nil
}

// pgbenchSummary is what pgbench's report says.
type pgbenchSummary struct {
	ok, failed int
	tps        float64 // without the initial connection time
}

// elapsed is the window the transactions took: pgbench's rate counts
// from the connections made, which its duration does not say.
func (s pgbenchSummary) elapsed() time.Duration {
	if s.tps <= 0 {
		return 0
	}
	return time.Duration(float64(s.ok) / s.tps * float64(time.Second))
}

// parsePgbench reads pgbench's report: the transactions processed, the
// failed ones (PostgreSQL 15 and later say it) and tps.
func parsePgbench(out []byte) (pgbenchSummary, error) {
	var s pgbenchSummary
	var haveOK, haveTPS bool
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "number of transactions actually processed:"):
			v := strings.Fields(strings.TrimPrefix(line, "number of transactions actually processed:"))
			if len(v) == 0 {
				return s, fmt.Errorf("report line %q", line)
			}
			n, err := strconv.Atoi(strings.SplitN(v[0], "/", 2)[0])
			if err != nil {
				return s, fmt.Errorf("report line %q: %w", line, err)
			}
			s.ok, haveOK = n, true
		case strings.HasPrefix(line, "number of failed transactions:"):
			v := strings.Fields(strings.TrimPrefix(line, "number of failed transactions:"))
			if len(v) == 0 {
				return s, fmt.Errorf("report line %q", line)
			}
			n, err := strconv.Atoi(v[0])
			if err != nil {
				return s, fmt.Errorf("report line %q: %w", line, err)
			}
			s.failed = n
		case strings.HasPrefix(line, "tps =") && strings.Contains(line, "without initial connection time"):
			v := strings.Fields(strings.TrimPrefix(line, "tps ="))
			if len(v) == 0 {
				return s, fmt.Errorf("report line %q", line)
			}
			f, err := strconv.ParseFloat(v[0], 64)
			if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
				return s, fmt.Errorf("report line %q: not a rate", line)
			}
			s.tps, haveTPS = f, true
		}
	}
	switch {
	case !haveOK:
		return s, errors.New("no \"number of transactions actually processed\" in pgbench's report")
	case !haveTPS:
		return s, errors.New("no \"tps = … (without initial connection time)\" in pgbench's report")
	case s.ok > 0 && s.tps == 0:
		return s, fmt.Errorf("%d transactions at a rate of 0", s.ok)
	}
	return s, nil
}

// pgbenchLatencies reads the latencies of the transactions that pgbench
// logged into dir (files log.<pid>[.<thread>]): a line per transaction,
// "client transaction latency_us script epoch_s epoch_us"; a failed one
// has "failed" or "serialization"/"deadlock" in place of its latency and
// is left out.
func pgbenchLatencies(dir string) ([]time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(dir, "log.*"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("pgbench wrote no transaction log")
	}
	var lat []time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for n, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			if line == "" {
				continue
			}
			v := strings.Fields(line)
			if len(v) < 3 {
				return nil, fmt.Errorf("%s line %d: %q is not a transaction", filepath.Base(f), n+1, line)
			}
			us, err := strconv.ParseInt(v[2], 10, 64)
			if err != nil {
				continue // failed, serialization or deadlock: counted by the report
			}
			if us < 0 {
				return nil, fmt.Errorf("%s line %d: latency %d", filepath.Base(f), n+1, us)
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
	}
	return lat, nil
}

// tail returns the last n bytes of b, for error messages.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
