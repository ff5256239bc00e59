-- +goose Up
-- turnd schema, version 10 (PostgreSQL): how often a running turn was resumed.
--
-- ClaimTurns counts every claim of a running turn whose lease expired. A
-- turn claimed again and again (its resumption fails every time) waits
-- longer before each next claim, and past the service's limit it is settled
-- failed with error recovery_exhausted instead of resumed. A constant
-- default: adding the column rewrites nothing, and the previous release
-- ignores it.
ALTER TABLE turns ADD COLUMN resumes integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE turns DROP COLUMN resumes;
