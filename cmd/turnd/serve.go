package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/lmittmann/tint"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/store/sqlite"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// store is what cmd needs of a store implementation beyond turn.Store.
type store interface {
	turn.Store
	Migrate(ctx context.Context) error
	SchemaVersion(ctx context.Context) (current, latest int, err error)
}

func newLogger(c config, w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(c.LogLevel))
	format := c.LogFormat
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly}))
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

func openStore(ctx context.Context, c config, log *slog.Logger) (store, error) {
	if c.DatabaseURL != "" {
		st, err := postgres.Open(ctx, c.DatabaseURL, postgres.Options{})
		if err != nil {
			return nil, fmt.Errorf("opening Postgres: %w", err)
		}
		log.Info("store: Postgres")
		return st, nil
	}
	st, err := sqlite.Open(ctx, c.DataPath)
	if err != nil {
		return nil, fmt.Errorf("opening embedded store %s: %w", c.DataPath, err)
	}
	log.Info("store: embedded SQLite (one process only; set DATABASE_URL for Postgres and replicas)", "path", c.DataPath)
	return st, nil
}

func migrate(ctx context.Context, c config, stderr io.Writer) error {
	log := newLogger(c, stderr)
	st, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	cur, _, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	log.Info("schema is current", "version", cur)
	return nil
}

func serve(ctx context.Context, c config, stderr io.Writer) error {
	log := newLogger(c, stderr)
	if len(c.Tokens) == 0 {
		if !isLoopback(c.Addr) {
			return fmt.Errorf("refusing to listen on %s without authentication: set TURND_API_TOKENS (or TURND_API_TOKENS_FILE), or listen on a loopback address such as 127.0.0.1:8080", c.Addr)
		}
		log.Warn("no API tokens configured: serving without authentication, on loopback only", "addr", c.Addr)
	}
	tools, stopReload, err := openTools(ctx, c, log)
	if err != nil {
		return fmt.Errorf("loading tool config: %w", err)
	}
	defer tools.Close()
	defer stopReload()

	st, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if !c.NoMigrate {
		if err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrating at start: %w", err)
		}
	}
	cur, latest, err := st.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if cur < latest {
		return fmt.Errorf("the database schema is at version %d, this turnd needs %d: run `turnd migrate`", cur, latest)
	}

	var webhookSigner, completionSigner *completion.Signer
	if c.WebhookSecret != "" {
		if webhookSigner, err = completion.NewSigner(c.WebhookSecret); err != nil {
			return fmt.Errorf("TURND_WEBHOOK_SECRET: %w", err)
		}
	} else {
		log.Info("TURND_WEBHOOK_SECRET is not set: turn.settled webhooks to sessions' callback URLs go out unsigned")
	}
	if c.CompletionSigningSecret != "" {
		if completionSigner, err = completion.NewSigner(c.CompletionSigningSecret); err != nil {
			return fmt.Errorf("TURND_COMPLETION_SIGNING_SECRET: %w", err)
		}
	}
	// cancels carries cancel_url requests off the service's goroutines; they
	// are best effort with retries inside CancelExternal.
	cancelCtx, stopCancels := context.WithCancel(context.Background())
	defer stopCancels()
	// Replicas on one Postgres tell each other about turn changes; the
	// embedded store serves one process and needs no notifier.
	var notifier turn.Notifier
	if pg, ok := st.(*postgres.Store); ok {
		n, err := postgres.NewNotifier(ctx, pg, postgres.NotifierOptions{Logger: log})
		if err != nil {
			return err
		}
		notifier = n
	}
	svc, err := turn.New(turn.Config{
		Store:            st,
		Notifier:         notifier,
		Tools:            tools.Registry,
		Logger:           log,
		LeaseTTL:         c.LeaseTTL,
		MaxCalls:         c.MaxCalls,
		CompletionSecret: c.CompletionSecret,
		// Signs the turn.settled webhooks POSTed to sessions' callback URLs;
		// without TURND_WEBHOOK_SECRET they go out unsigned.
		WebhookSigner: webhookSigner,
		CompleteURL:   func(key string) string { return c.PublicURL + "/v1/complete/" + key },
		CancelHook: func(cp turn.Completion, key string) {
			go func() {
				err := tools.Registry().CancelExternal(cancelCtx, cp.CallName, tool.CancelRequest{
					Key: key, SessionID: cp.SessionID, TurnID: cp.TurnID, CallID: cp.CallID,
				}, webhookSigner)
				if err != nil {
					log.Warn("cancelling external work failed", "session_id", cp.SessionID, "turn_id", cp.TurnID, "call_id", cp.CallID, "err", err)
				}
			}()
		},
	})
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	handler := api.New(api.Config{
		Service:          svc,
		Tokens:           c.Tokens,
		Logger:           log,
		MaxBodyBytes:     c.MaxBodyBytes,
		CompletionSigner: completionSigner,
	})
	srv := &http.Server{
		Addr:              c.Addr,
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		// A synchronous POST of a turn holds its response while the turn
		// runs (up to api.Config.MaxWait, 10 minutes).
		WriteTimeout:   11 * time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		_ = svc.Shutdown(context.Background())
		return fmt.Errorf("listening on %s: %w", c.Addr, err)
	}
	log.Info("turnd serving", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		_ = svc.Shutdown(context.Background())
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", c.ShutdownGrace)
	graceCtx, cancel := context.WithTimeout(context.Background(), c.ShutdownGrace)
	defer cancel()
	// The service stops taking turns first and lets running waves finish
	// within the grace; the HTTP server meanwhile drains its requests,
	// which end when their waves do.
	svcDone := make(chan error, 1)
	go func() { svcDone <- svc.Shutdown(graceCtx) }()
	httpCtx, cancelHTTP := context.WithTimeout(context.Background(), c.ShutdownGrace+5*time.Second)
	defer cancelHTTP()
	if err := srv.Shutdown(httpCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("http shutdown", "err", err)
	}
	if err := <-svcDone; err != nil {
		log.Warn("waves cancelled at the end of the grace period", "err", err)
	}
	log.Info("stopped")
	return nil
}
