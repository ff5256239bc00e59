-- +goose Up
-- turnd schema, version 13 (SQLite): calls parked for a person's approval,
-- and the sessions' approval policies; the same columns as in PostgreSQL.
ALTER TABLE completions ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN approval TEXT;
CREATE INDEX completions_approvals ON completions (created_at, session_id, turn_id, call_idx)
    WHERE status = 'pending' AND reason = 'approval';

-- +goose Down
DROP INDEX completions_approvals;
ALTER TABLE sessions DROP COLUMN approval;
ALTER TABLE completions DROP COLUMN reason;
