-- +goose Up
-- turnd schema, version 11 (SQLite): indexes for the listings.
--
-- The same indexes as in PostgreSQL: each listing page is one scan of one
-- of them, backwards from the cursor.
CREATE INDEX sessions_listing ON sessions (created_at, id);
CREATE INDEX turns_listing ON turns (session_id, created_at, id);
CREATE INDEX completions_parked ON completions (created_at, session_id, turn_id, call_idx) WHERE status = 'pending';

-- +goose Down
DROP INDEX completions_parked;
DROP INDEX turns_listing;
DROP INDEX sessions_listing;
