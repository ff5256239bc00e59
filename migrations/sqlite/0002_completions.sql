-- +goose Up
-- turnd schema, version 2 (SQLite): deferred completions.
--
-- The same tables as the PostgreSQL schema, adapted as in version 1: times
-- INTEGER unix microseconds (UTC), durations INTEGER microseconds, payloads
-- TEXT exactly as delivered, hashes BLOB.
CREATE TABLE completions (
    key_hash           BLOB    NOT NULL PRIMARY KEY,
    session_id         TEXT    NOT NULL,
    turn_id            TEXT    NOT NULL,
    call_idx           INTEGER NOT NULL,
    call_id            TEXT    NOT NULL,
    call_name          TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    deadline           INTEGER,                  -- set when the call parks
    heartbeat_timeout  INTEGER NOT NULL DEFAULT 0,
    heartbeat_deadline INTEGER,                  -- NULL without a heartbeat clock
    on_timeout         TEXT    NOT NULL DEFAULT '',
    on_cancel          TEXT    NOT NULL DEFAULT '',
    cancel_url         TEXT    NOT NULL DEFAULT '',
    payload            TEXT,
    payload_hash       BLOB,
    created_at         INTEGER NOT NULL,
    resolved_at        INTEGER,
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
) STRICT;

CREATE INDEX completions_turn ON completions (session_id, turn_id);

-- Due pending completions, earliest first. SQLite's multi-argument min()
-- is NULL when any argument is, hence the coalesces: the key is the earlier
-- of the clocks that are set. Queries must repeat this expression exactly
-- for SQLite to use the index.
CREATE INDEX completions_due ON completions (
    min(coalesce(deadline, heartbeat_deadline), coalesce(heartbeat_deadline, deadline))
) WHERE status = 'pending';

CREATE TABLE settings (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE settings;
DROP TABLE completions;
