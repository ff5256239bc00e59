-- +goose Up
-- turnd schema, version 7 (SQLite): nothing changes.
--
-- PostgreSQL's version 7 keys results by (session_id, call_id, turn_id, idx)
-- to write one index entry per result instead of two. The embedded store
-- keeps its two indexes: it serves one process, whose writes are not bound
-- by index maintenance, and SQLite cannot drop a primary key without
-- rebuilding the table. The version exists so that both dialects move in
-- step.
SELECT 1;

-- +goose Down
SELECT 1;
