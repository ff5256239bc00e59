-- +goose Up
-- turnd schema, version 1 (SQLite).
--
-- The same tables as the PostgreSQL schema, adapted: times are INTEGER unix
-- microseconds (UTC), booleans INTEGER 0/1, JSON values TEXT kept exactly as
-- written (byte-exact round trip). STRICT tables make SQLite enforce the
-- declared types.
--
-- The runner records applied versions in goose_db_version, which it creates
-- before this file runs (see package migrations).

-- sessions.last_seq is the seq of the session's latest ledger line; writers
-- increment it in the transaction that inserts the lines, so seqs have no
-- gaps.
CREATE TABLE sessions (
    id           TEXT    NOT NULL PRIMARY KEY,
    tools        TEXT,                       -- JSON array; NULL grants every tool
    budget       TEXT    NOT NULL,
    callback_url TEXT    NOT NULL DEFAULT '',
    metadata     TEXT,
    created_at   INTEGER NOT NULL,
    last_seq     INTEGER NOT NULL DEFAULT 0
) STRICT;

-- A running turn is leased to one owner; settled and waiting turns hold no
-- lease.
CREATE TABLE turns (
    session_id     TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id             TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    mode           TEXT    NOT NULL,
    failure_policy TEXT    NOT NULL,
    calls          TEXT    NOT NULL,
    hash           TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    settled_at     INTEGER,
    lease_owner    TEXT,
    lease_until    INTEGER,
    PRIMARY KEY (session_id, id)
) STRICT;

-- Claiming scans running turns for an expired lease.
CREATE INDEX turns_running ON turns (lease_until) WHERE status = 'running';

CREATE TABLE results (
    session_id     TEXT    NOT NULL,
    turn_id        TEXT    NOT NULL,
    idx            INTEGER NOT NULL,
    call_id        TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    effect         TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    output         TEXT,
    error_code     TEXT,                     -- NULL when the call has no error
    error_message  TEXT,
    truncated      INTEGER NOT NULL DEFAULT 0,
    original_bytes INTEGER NOT NULL DEFAULT 0,
    original_lines INTEGER NOT NULL DEFAULT 0,
    output_id      TEXT    NOT NULL DEFAULT '',
    attempts       INTEGER NOT NULL DEFAULT 0,
    started_at     INTEGER,
    finished_at    INTEGER,
    replayed_from  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, turn_id, idx),
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
) STRICT;

CREATE INDEX results_call ON results (session_id, call_id);

CREATE TABLE ledger (
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL DEFAULT '',
    call_id    TEXT    NOT NULL DEFAULT '',
    kind       TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    data       TEXT,
    PRIMARY KEY (session_id, seq)
) STRICT;

-- Full outputs live by their own expiry: no foreign key. expires_at NULL
-- keeps the output until it is deleted otherwise.
CREATE TABLE outputs (
    id           TEXT    NOT NULL PRIMARY KEY,
    session_id   TEXT    NOT NULL,
    turn_id      TEXT    NOT NULL,
    call_id      TEXT    NOT NULL,
    content_type TEXT    NOT NULL DEFAULT '',
    data         BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER
) STRICT;

CREATE INDEX outputs_expiry ON outputs (expires_at);

-- +goose Down
DROP TABLE outputs;
DROP TABLE ledger;
DROP TABLE results;
DROP TABLE turns;
DROP TABLE sessions;
