-- +goose Up
-- turnd schema, version 2 (PostgreSQL): deferred completions.
--
-- A tool may park its call on a completion key; an external system later
-- delivers the result to POST /v1/complete/{key}. One row per key, keyed by
-- the key's SHA-256 (the key itself is never stored). A key is issued when
-- the tool asks for it, pending once the call's pending outcome is committed
-- (early when a delivery beat that commit), and resolved exactly once:
-- completed, timed_out or cancelled.
--
-- Durations are bigint microseconds; times timestamptz (microseconds);
-- payloads json, kept byte for byte as delivered.
CREATE TABLE completions (
    key_hash           bytea       PRIMARY KEY,
    session_id         text        NOT NULL,
    turn_id            text        NOT NULL,
    call_idx           integer     NOT NULL,
    call_id            text        NOT NULL,
    call_name          text        NOT NULL,
    status             text        NOT NULL,
    deadline           timestamptz,              -- set when the call parks
    heartbeat_timeout  bigint      NOT NULL DEFAULT 0,
    heartbeat_deadline timestamptz,              -- NULL without a heartbeat clock
    on_timeout         text        NOT NULL DEFAULT '',
    on_cancel          text        NOT NULL DEFAULT '',
    cancel_url         text        NOT NULL DEFAULT '',
    payload            json,
    payload_hash       bytea,
    created_at         timestamptz NOT NULL,
    resolved_at        timestamptz,
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
);

-- A turn's completions: listing them, and counting those still pending
-- when one resolves (to settle the turn).
CREATE INDEX completions_turn ON completions (session_id, turn_id);

-- The sweeper looks for pending completions whose deadline or heartbeat
-- deadline has passed, earliest first. LEAST ignores NULLs, so the key is
-- the earlier of the two clocks that are set; the index holds only pending
-- rows, the few that can fall due.
CREATE INDEX completions_due ON completions (LEAST(deadline, heartbeat_deadline)) WHERE status = 'pending';

-- Settings shared by every replica (the completion secret). A row is
-- written once, by the first replica that needs it.
CREATE TABLE settings (
    name  text PRIMARY KEY,
    value text NOT NULL
);

-- +goose Down
DROP TABLE settings;
DROP TABLE completions;
