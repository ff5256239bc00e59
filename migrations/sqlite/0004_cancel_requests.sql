-- +goose Up
-- turnd schema, version 4 (SQLite): cancel requests across replicas.
--
-- The same column as in PostgreSQL (INTEGER unix microseconds, UTC). The
-- embedded store serves one process, which cancels its own waves directly;
-- the column keeps the two stores' contracts alike.
ALTER TABLE turns ADD COLUMN cancel_requested_at INTEGER;

-- +goose Down
ALTER TABLE turns DROP COLUMN cancel_requested_at;
