package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/turn"
)

// Options tunes the connection pool. The zero value is ready to use: every
// zero field takes the default named in its comment (see WithDefaults).
// Options override the corresponding pool_* and connect_timeout parameters of
// the connection URL.
type Options struct {
	// MaxConns caps the main pool's connections. Every in-flight store call
	// holds one for a single round trip, so a few per core suffice. The
	// group statements have a pool of their own besides it, of up to
	// 2 × GroupStatements connections (see GroupPool).
	// Default: 4 × GOMAXPROCS, at least 8.
	MaxConns int32
	// MinConns connections are kept open even when idle. Default: 0.
	MinConns int32
	// MaxConnLifetime closes a connection this long after it was opened (so
	// that load rebalances after a failover). Default: 1h.
	MaxConnLifetime time.Duration
	// MaxConnIdleTime closes a connection idle this long. Default: 30m.
	MaxConnIdleTime time.Duration
	// HealthCheckPeriod is how often idle connections are checked.
	// Default: 1m.
	HealthCheckPeriod time.Duration
	// ConnectTimeout bounds opening one connection. Default: 5s.
	ConnectTimeout time.Duration
	// ApplicationName is shown in pg_stat_activity. Default: "turnd".
	ApplicationName string
	// GroupStatements is how many group-commit statements of each kind
	// (recording whole turns, looking them up) may run at once; beyond the
	// first, one starts only when enough calls wait (16 of either kind;
	// see group), and a statement that ends beside another leaves fewer
	// to it. Calls that arrive meanwhile wait and share the
	// next statement: larger batches cost the database less per turn, and
	// a second statement lets a queue be written while the first waits
	// for its WAL flush. Default: GOMAXPROCS / 2, at least 2; at most
	// maxGroupStatements.
	GroupStatements int
	// NotifyURL is the database turn notifications go through (a Notifier
	// sends and listens there) when it is not the store's: on Citus, the
	// coordinator, where a replica's store connects to a worker. Its pool
	// holds at most two connections besides the listener's. Default: the
	// store's database.
	NotifyURL string
	// Sharded: the database shards the tables by session (Citus). The
	// statements that would lock or write rows of many sessions at once
	// (ClaimTurns, ClaimWebhooks, RenewLeases) are made a read across the
	// shards and one statement routed to each row's session (sharded.go).
	Sharded bool
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.MaxConns == 0 {
		o.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0)))
	}
	if o.MaxConnLifetime == 0 {
		o.MaxConnLifetime = time.Hour
	}
	if o.MaxConnIdleTime == 0 {
		o.MaxConnIdleTime = 30 * time.Minute
	}
	if o.HealthCheckPeriod == 0 {
		o.HealthCheckPeriod = time.Minute
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.ApplicationName == "" {
		o.ApplicationName = "turnd"
	}
	if o.GroupStatements == 0 {
		o.GroupStatements = min(maxGroupStatements, max(2, runtime.GOMAXPROCS(0)/2))
	}
	return o
}

// maxGroupStatements bounds Options.GroupStatements (each may hold a
// connection of the group pool).
const maxGroupStatements = 64

func (o Options) validate() error {
	switch {
	case o.MaxConns < 1:
		return fmt.Errorf("MaxConns %d: must be at least 1", o.MaxConns)
	case o.GroupStatements < 1 || o.GroupStatements > maxGroupStatements:
		return fmt.Errorf("GroupStatements %d: must be 1 to %d", o.GroupStatements, maxGroupStatements)
	case o.MinConns < 0 || o.MinConns > o.MaxConns:
		return fmt.Errorf("MinConns %d: must be between 0 and MaxConns (%d)", o.MinConns, o.MaxConns)
	case o.MaxConnLifetime < 0, o.MaxConnIdleTime < 0, o.HealthCheckPeriod < 0, o.ConnectTimeout < 0:
		return errors.New("durations must not be negative")
	}
	return nil
}

// Store is the PostgreSQL turn.Store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// groupPool runs the group statements (group.go) on connections of
	// their own, which use generic plans only (see genericPlans).
	groupPool *pgxpool.Pool
	// The statements that concurrent turns share (group.go).
	lookups *group[*lookupCall, struct{}]
	records *group[*recordCall, string]
	// resolver shares transactions among concurrent Resolves (resolve.go).
	resolver *group[*resolveCall, string]
	// notifyPool sends turn notifications (Notifier): pool itself, or one
	// of its own on Options.NotifyURL.
	notifyPool *pgxpool.Pool
	// sharded: Options.Sharded.
	sharded bool
	// binary: the pool prepares statements (pgx's default exec mode), so
	// the hot path may run its own prepared statements (execBinary).
	binary bool
}

var _ turn.MigratedStore = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string; search_path may be set in it) and checks that it
// answers. It does not check the schema: run Migrate, then Ping.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("opening postgres store: options: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, errors.New("opening postgres store: invalid connection string")
	}
	cfg.MaxConns = opts.MaxConns
	cfg.MinConns = opts.MinConns
	cfg.MaxConnLifetime = opts.MaxConnLifetime
	cfg.MaxConnLifetimeJitter = opts.MaxConnLifetime / 10 // avoid reconnect storms
	cfg.MaxConnIdleTime = opts.MaxConnIdleTime
	cfg.HealthCheckPeriod = opts.HealthCheckPeriod
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	}
	groupCfg := cfg.Copy()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("opening postgres store", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, wrap("opening postgres store", err)
	}
	// Each kind of group statement runs at most GroupStatements at a time.
	groupCfg.MaxConns = int32(2 * opts.GroupStatements)
	groupCfg.MinConns = 0
	genericPlans(groupCfg)
	groupPool, err := pgxpool.NewWithConfig(ctx, groupCfg)
	if err != nil {
		pool.Close()
		return nil, wrap("opening postgres store", err)
	}
	// A connection of the group pool now, so that one it cannot open (its
	// SET refused) fails the start rather than every turn.
	if err := groupPool.Ping(ctx); err != nil {
		groupPool.Close()
		pool.Close()
		return nil, wrap("opening postgres store: group statements' pool", err)
	}
	notifyPool := pool
	if opts.NotifyURL != "" {
		if notifyPool, err = openNotifyPool(ctx, opts); err != nil {
			groupPool.Close()
			pool.Close()
			return nil, err
		}
	}
	st := &Store{pool: pool, groupPool: groupPool, notifyPool: notifyPool, sharded: opts.Sharded, binary: cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement}
	st.lookups, st.records = newLookups(st, opts.GroupStatements), newRecorder(st, opts.GroupStatements)
	st.resolver = newResolver(st, opts.GroupStatements)
	return st, nil
}

// Pool returns the store's main connection pool, for tests and tools that
// need SQL of their own in the same database. The store keeps owning it: do
// not close it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// GroupPool returns the pool the group statements run on (see
// genericPlans), for tests and tools that watch it (its Stat, say). The
// store keeps owning it: do not close it, and do not run other SQL on it.
func (s *Store) GroupPool() *pgxpool.Pool { return s.groupPool }

// Close closes the pools, waiting for connections in use to be released.
func (s *Store) Close() {
	if s.notifyPool != s.pool {
		s.notifyPool.Close()
	}
	s.groupPool.Close()
	s.pool.Close()
}

// openNotifyPool opens the pool of Options.NotifyURL and checks that it
// answers.
func openNotifyPool(ctx context.Context, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(opts.NotifyURL)
	if err != nil {
		return nil, errors.New("opening postgres store: invalid notification connection string")
	}
	cfg.MaxConns, cfg.MinConns = 2, 0
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, wrap("opening postgres store: the notification database", err)
	}
	return pool, nil
}

// genericPlans makes cfg's connections plan their prepared statements once
// (plan_cache_mode force_generic_plan) when the pool prepares statements
// and the connection string does not set plan_cache_mode itself. See
// ARCHITECTURE.md, "store/postgres: statements", generic plans.
func genericPlans(cfg *pgxpool.Config) {
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; set {
		return
	}
	if strings.Contains(cfg.ConnConfig.RuntimeParams["options"], "plan_cache_mode") {
		return
	}
	if cfg.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return
	}
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, c); err != nil {
				return err
			}
		}
		_, err := c.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
		return err
	}
}

// Ping checks that the database answers, on both pools, and that its schema
// is not behind this binary (errors.Is(err, migrations.ErrSchemaBehind)): a
// server must not serve on a schema that lacks what it needs. A newer schema is accepted —
// during a rolling upgrade old binaries keep serving while new ones migrate,
// so migrations must stay compatible with the previous release.
func (s *Store) Ping(ctx context.Context) error {
	current, latest, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("pinging postgres store: %w", err)
	}
	if current < latest {
		return fmt.Errorf("pinging postgres store: schema version %d, this binary needs %d (run turnd migrate): %w",
			current, latest, migrations.ErrSchemaBehind)
	}
	if err := s.groupPool.Ping(ctx); err != nil {
		return wrap("pinging postgres store: group statements' pool", err)
	}
	return nil
}
