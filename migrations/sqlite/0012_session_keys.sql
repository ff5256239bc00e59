-- +goose Up
-- turnd schema, version 12 (SQLite): every table keyed by its session.
--
-- The same keys as PostgreSQL's version 12 (see that file for why):
-- outputs, completions and webhooks are keyed by (session_id, id) instead
-- of their id alone, and legacy_keys and legacy_outputs map the completion
-- keys and output ids issued before this version, which do not carry their
-- session, to it. SQLite cannot change a table's primary key in place: each
-- of the three tables is rebuilt under its new key, its rows copied, and
-- its indexes made again as they were.

CREATE TABLE outputs_rekeyed (
    id           TEXT    NOT NULL,
    session_id   TEXT    NOT NULL,
    turn_id      TEXT    NOT NULL,
    call_id      TEXT    NOT NULL,
    content_type TEXT    NOT NULL DEFAULT '',
    data         BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    PRIMARY KEY (session_id, id)
) STRICT;
INSERT INTO outputs_rekeyed (id, session_id, turn_id, call_id, content_type, data, created_at, expires_at)
SELECT id, session_id, turn_id, call_id, content_type, data, created_at, expires_at FROM outputs;
DROP TABLE outputs;
ALTER TABLE outputs_rekeyed RENAME TO outputs;
CREATE INDEX outputs_expiry ON outputs (expires_at);

CREATE TABLE completions_rekeyed (
    key_hash           BLOB    NOT NULL,
    session_id         TEXT    NOT NULL,
    turn_id            TEXT    NOT NULL,
    call_idx           INTEGER NOT NULL,
    call_id            TEXT    NOT NULL,
    call_name          TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    deadline           INTEGER,
    heartbeat_timeout  INTEGER NOT NULL DEFAULT 0,
    heartbeat_deadline INTEGER,
    on_timeout         TEXT    NOT NULL DEFAULT '',
    on_cancel          TEXT    NOT NULL DEFAULT '',
    cancel_url         TEXT    NOT NULL DEFAULT '',
    payload            TEXT,
    payload_hash       BLOB,
    created_at         INTEGER NOT NULL,
    resolved_at        INTEGER,
    late_hashes        BLOB    NOT NULL DEFAULT x'',
    late_dropped       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, key_hash),
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
) STRICT;
INSERT INTO completions_rekeyed (key_hash, session_id, turn_id, call_idx, call_id, call_name, status, deadline, heartbeat_timeout, heartbeat_deadline, on_timeout, on_cancel, cancel_url, payload, payload_hash, created_at, resolved_at, late_hashes, late_dropped)
SELECT key_hash, session_id, turn_id, call_idx, call_id, call_name, status, deadline, heartbeat_timeout, heartbeat_deadline, on_timeout, on_cancel, cancel_url, payload, payload_hash, created_at, resolved_at, late_hashes, late_dropped FROM completions;
DROP TABLE completions;
ALTER TABLE completions_rekeyed RENAME TO completions;
CREATE INDEX completions_turn ON completions (session_id, turn_id);
CREATE INDEX completions_due ON completions (
    min(coalesce(deadline, heartbeat_deadline), coalesce(heartbeat_deadline, deadline))
) WHERE status = 'pending';
CREATE INDEX completions_parked ON completions (created_at, session_id, turn_id, call_idx) WHERE status = 'pending';

CREATE TABLE webhooks_rekeyed (
    id              TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    turn_id         TEXT    NOT NULL,
    url             TEXT    NOT NULL,
    event           TEXT    NOT NULL,
    body            TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER,
    dead_at         INTEGER,
    PRIMARY KEY (session_id, id),
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
) STRICT;
INSERT INTO webhooks_rekeyed (id, session_id, turn_id, url, event, body, attempts, next_attempt_at, last_error, created_at, delivered_at, dead_at)
SELECT id, session_id, turn_id, url, event, body, attempts, next_attempt_at, last_error, created_at, delivered_at, dead_at FROM webhooks;
DROP TABLE webhooks;
ALTER TABLE webhooks_rekeyed RENAME TO webhooks;
CREATE INDEX webhooks_due ON webhooks (next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL;

CREATE TABLE legacy_keys (
    key_hash   BLOB NOT NULL PRIMARY KEY,
    session_id TEXT NOT NULL
) STRICT;
INSERT INTO legacy_keys (key_hash, session_id) SELECT key_hash, session_id FROM completions;

CREATE TABLE legacy_outputs (
    id         TEXT NOT NULL PRIMARY KEY,
    session_id TEXT NOT NULL
) STRICT;
INSERT INTO legacy_outputs (id, session_id) SELECT id, session_id FROM outputs;

-- +goose Down
-- The tables are rebuilt under version 11's keys; ids and key hashes are
-- unique on their own, so every row fits them.
DROP TABLE legacy_outputs;
DROP TABLE legacy_keys;

CREATE TABLE webhooks_rekeyed (
    id              TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    turn_id         TEXT    NOT NULL,
    url             TEXT    NOT NULL,
    event           TEXT    NOT NULL,
    body            TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER,
    dead_at         INTEGER,
    PRIMARY KEY (id),
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
) STRICT;
INSERT INTO webhooks_rekeyed (id, session_id, turn_id, url, event, body, attempts, next_attempt_at, last_error, created_at, delivered_at, dead_at)
SELECT id, session_id, turn_id, url, event, body, attempts, next_attempt_at, last_error, created_at, delivered_at, dead_at FROM webhooks;
DROP TABLE webhooks;
ALTER TABLE webhooks_rekeyed RENAME TO webhooks;
CREATE INDEX webhooks_due ON webhooks (next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL;

CREATE TABLE completions_rekeyed (
    key_hash           BLOB    NOT NULL,
    session_id         TEXT    NOT NULL,
    turn_id            TEXT    NOT NULL,
    call_idx           INTEGER NOT NULL,
    call_id            TEXT    NOT NULL,
    call_name          TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    deadline           INTEGER,
    heartbeat_timeout  INTEGER NOT NULL DEFAULT 0,
    heartbeat_deadline INTEGER,
    on_timeout         TEXT    NOT NULL DEFAULT '',
    on_cancel          TEXT    NOT NULL DEFAULT '',
    cancel_url         TEXT    NOT NULL DEFAULT '',
    payload            TEXT,
    payload_hash       BLOB,
    created_at         INTEGER NOT NULL,
    resolved_at        INTEGER,
    late_hashes        BLOB    NOT NULL DEFAULT x'',
    late_dropped       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key_hash),
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
) STRICT;
INSERT INTO completions_rekeyed (key_hash, session_id, turn_id, call_idx, call_id, call_name, status, deadline, heartbeat_timeout, heartbeat_deadline, on_timeout, on_cancel, cancel_url, payload, payload_hash, created_at, resolved_at, late_hashes, late_dropped)
SELECT key_hash, session_id, turn_id, call_idx, call_id, call_name, status, deadline, heartbeat_timeout, heartbeat_deadline, on_timeout, on_cancel, cancel_url, payload, payload_hash, created_at, resolved_at, late_hashes, late_dropped FROM completions;
DROP TABLE completions;
ALTER TABLE completions_rekeyed RENAME TO completions;
CREATE INDEX completions_turn ON completions (session_id, turn_id);
CREATE INDEX completions_due ON completions (
    min(coalesce(deadline, heartbeat_deadline), coalesce(heartbeat_deadline, deadline))
) WHERE status = 'pending';
CREATE INDEX completions_parked ON completions (created_at, session_id, turn_id, call_idx) WHERE status = 'pending';

CREATE TABLE outputs_rekeyed (
    id           TEXT    NOT NULL,
    session_id   TEXT    NOT NULL,
    turn_id      TEXT    NOT NULL,
    call_id      TEXT    NOT NULL,
    content_type TEXT    NOT NULL DEFAULT '',
    data         BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    PRIMARY KEY (id)
) STRICT;
INSERT INTO outputs_rekeyed (id, session_id, turn_id, call_id, content_type, data, created_at, expires_at)
SELECT id, session_id, turn_id, call_id, content_type, data, created_at, expires_at FROM outputs;
DROP TABLE outputs;
ALTER TABLE outputs_rekeyed RENAME TO outputs;
CREATE INDEX outputs_expiry ON outputs (expires_at);
