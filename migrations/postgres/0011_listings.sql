-- +goose Up
-- turnd schema, version 11 (PostgreSQL): indexes for the listings.
--
-- The web UI and GET /v1/sessions, /v1/sessions/{id}/turns and /v1/pending
-- page through sessions, a session's turns and the parked calls newest
-- first, by (created_at, id) descending after a cursor. Each page is one
-- backward scan of one of these indexes from the cursor, however many rows
-- come before it. None of the indexed columns is ever updated, so the
-- sessions' and turns' updates stay HOT; the parked calls' index holds
-- only pending completions, as completions_due does.
CREATE INDEX sessions_listing ON sessions (created_at, id);
CREATE INDEX turns_listing ON turns (session_id, created_at, id);
CREATE INDEX completions_parked ON completions (created_at, session_id, turn_id, call_idx) WHERE status = 'pending';

-- +goose Down
DROP INDEX completions_parked;
DROP INDEX turns_listing;
DROP INDEX sessions_listing;
