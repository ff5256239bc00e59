package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

const (
	// ON CONFLICT DO NOTHING reports a taken id as "no row inserted" rather
	// than as an error that would need parsing.
	sqlCreateSession = `INSERT INTO sessions (id, tools, budget, callback_url, metadata, created_at, approval)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO NOTHING`

	sqlGetSession = `SELECT tools, budget, callback_url, metadata, created_at, approval
FROM sessions WHERE id = $1`
)

// CreateSession inserts sess; turn.ErrSessionExists when the id is taken.
func (s *Store) CreateSession(ctx context.Context, sess turn.Session) error {
	c, err := sqlstore.SessionColumns(sess)
	if err != nil {
		return fmt.Errorf("creating session %s: %w", sess.ID, err)
	}
	tag, err := s.pool.Exec(ctx, sqlCreateSession, append(sessionColumnArgs(sess, c), c.Approval)...)
	if err != nil {
		return wrap("creating session "+sess.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("creating session %s: %w", sess.ID, turn.ErrSessionExists)
	}
	return nil
}

// GetSession returns the session or turn.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (turn.Session, error) {
	var row sessionRow
	err := s.pool.QueryRow(ctx, sqlGetSession, id).Scan(row.dest()...)
	if err != nil {
		return turn.Session{}, wrap("getting session "+id, err)
	}
	sess, err := row.session(id)
	if err != nil {
		return turn.Session{}, fmt.Errorf("getting session %s: %w", id, err)
	}
	return sess, nil
}

// sessionColumnArgs returns sess, its columns encoded as c, as the
// arguments id, tools, budget, callback_url, metadata, created_at.
func sessionColumnArgs(sess turn.Session, c sqlstore.SessionCols) []any {
	return []any{sess.ID, c.Tools, c.Budget, sess.CallbackURL, c.Metadata, sess.CreatedAt}
}

// sessionRow scans the columns tools, budget, callback_url, metadata,
// created_at.
type sessionRow struct {
	sqlstore.SessionRow
	createdAt pgtype.Timestamptz
}

func (r *sessionRow) dest() []any {
	return r.Dest(&r.createdAt)
}

func (r *sessionRow) session(id string) (turn.Session, error) {
	return r.Session(id, fromNullTime(r.createdAt))
}
