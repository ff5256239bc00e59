-- +goose Up
-- turnd schema, version 1 (PostgreSQL).
--
-- Objects are created unqualified, in the first schema of the connection's
-- search_path, so one database can hold several isolated turnd schemas
-- (the test harness gives every test its own).
--
-- JSON values the service hands over as json.RawMessage (metadata, call
-- arguments, result outputs, line data) are stored as `json`, not `jsonb`:
-- json keeps the text exactly as written, so they round-trip byte for byte.
--
-- The runner records applied versions in goose_db_version, which it creates
-- before this file runs (see package migrations).

-- sessions.last_seq is the seq of the session's latest ledger line. Writers
-- allocate seqs by incrementing it in the transaction that inserts the lines:
-- the row lock serialises a session's writers and a rollback returns the
-- seqs, so the ledger has no gaps. The row is updated on every write; a low
-- fillfactor leaves room for HOT updates (last_seq is not indexed).
CREATE TABLE sessions (
    id           text        PRIMARY KEY,
    tools        json,                       -- NULL grants every tool; [] grants none
    budget       json        NOT NULL,
    callback_url text        NOT NULL DEFAULT '',
    metadata     json,
    created_at   timestamptz NOT NULL,
    last_seq     bigint      NOT NULL DEFAULT 0
) WITH (fillfactor = 50);

-- A running turn is leased to one server (lease_owner until lease_until);
-- settled and waiting turns hold no lease.
CREATE TABLE turns (
    session_id     text        NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id             text        NOT NULL,
    status         text        NOT NULL,
    mode           text        NOT NULL,
    failure_policy text        NOT NULL,
    calls          json        NOT NULL,
    hash           text        NOT NULL,
    created_at     timestamptz NOT NULL,
    settled_at     timestamptz,
    lease_owner    text,
    lease_until    timestamptz,
    PRIMARY KEY (session_id, id)
) WITH (fillfactor = 80);

-- Claiming looks for running turns whose lease expired. The index holds only
-- running turns and deliberately leaves lease_until out of its key: every
-- commit extends the lease, and an update that touches no indexed column can
-- be HOT (no new index entries). The running set is small, so filtering it
-- on lease_until is cheap.
CREATE INDEX turns_running ON turns (created_at) WHERE status = 'running';

-- One row per accounted call, upserted by (session_id, turn_id, idx): a
-- 'started' row is later replaced by the call's outcome.
CREATE TABLE results (
    session_id     text        NOT NULL,
    turn_id        text        NOT NULL,
    idx            integer     NOT NULL,
    call_id        text        NOT NULL,
    name           text        NOT NULL,
    effect         text        NOT NULL,
    status         text        NOT NULL,
    output         json,
    error_code     text,                     -- NULL when the call has no error
    error_message  text,
    truncated      boolean     NOT NULL DEFAULT false,
    original_bytes bigint      NOT NULL DEFAULT 0,
    original_lines bigint      NOT NULL DEFAULT 0,
    output_id      text        NOT NULL DEFAULT '',
    attempts       integer     NOT NULL DEFAULT 0,
    started_at     timestamptz,
    finished_at    timestamptz,
    replayed_from  text        NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, turn_id, idx),
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
);

-- Answered looks results up by call id within a session.
CREATE INDEX results_call ON results (session_id, call_id);

CREATE TABLE ledger (
    session_id text        NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        bigint      NOT NULL,
    turn_id    text        NOT NULL DEFAULT '',
    call_id    text        NOT NULL DEFAULT '',
    kind       text        NOT NULL,
    at         timestamptz NOT NULL,
    data       json,
    PRIMARY KEY (session_id, seq)
);

-- Full outputs live by their own expiry, not by their session's: no foreign
-- key. expires_at NULL keeps the output until it is deleted otherwise.
CREATE TABLE outputs (
    id           text        PRIMARY KEY,
    session_id   text        NOT NULL,
    turn_id      text        NOT NULL,
    call_id      text        NOT NULL,
    content_type text        NOT NULL DEFAULT '',
    data         bytea       NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz
);

CREATE INDEX outputs_expiry ON outputs (expires_at);

-- +goose Down
DROP TABLE outputs;
DROP TABLE ledger;
DROP TABLE results;
DROP TABLE turns;
DROP TABLE sessions;
