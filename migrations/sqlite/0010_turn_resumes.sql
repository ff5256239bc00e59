-- +goose Up
-- turnd schema, version 10 (SQLite): how often a running turn was resumed.
--
-- The same column as in PostgreSQL: ClaimTurns counts every claim of a
-- running turn whose lease expired, backs off before claiming it again, and
-- the service settles it failed (recovery_exhausted) past its limit.
ALTER TABLE turns ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE turns DROP COLUMN resumes;
