package sqlite

import (
	"context"
	"fmt"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

const (
	// ON CONFLICT DO NOTHING reports a taken id as "no row inserted".
	sqlCreateSession = `INSERT INTO sessions (id, tools, budget, callback_url, metadata, created_at, approval)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`

	sqlGetSession = `SELECT tools, budget, callback_url, metadata, created_at, approval
FROM sessions WHERE id = ?`
)

// CreateSession inserts sess; turn.ErrSessionExists when the id is taken.
func (s *Store) CreateSession(ctx context.Context, sess turn.Session) error {
	c, err := sqlstore.SessionColumns(sess)
	if err != nil {
		return fmt.Errorf("creating session %s: %w", sess.ID, err)
	}
	res, err := s.write.ExecContext(ctx, sqlCreateSession, append(sessionColumnArgs(sess, c), nullText(c.Approval))...)
	if err != nil {
		return wrap("creating session "+sess.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrap("creating session "+sess.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("creating session %s: %w", sess.ID, turn.ErrSessionExists)
	}
	return nil
}

// GetSession returns the session or turn.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (turn.Session, error) {
	var row sessionRow
	if err := s.read.QueryRowContext(ctx, sqlGetSession, id).Scan(row.dest()...); err != nil {
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
	return []any{sess.ID, nullText(c.Tools), string(c.Budget), sess.CallbackURL, nullText(c.Metadata), micros(sess.CreatedAt)}
}

// sessionRow scans the columns tools, budget, callback_url, metadata,
// created_at.
type sessionRow struct {
	sqlstore.SessionRow
	createdAt int64
}

func (r *sessionRow) dest() []any {
	return r.Dest(&r.createdAt)
}

func (r *sessionRow) session(id string) (turn.Session, error) {
	return r.Session(id, fromMicros(r.createdAt))
}
