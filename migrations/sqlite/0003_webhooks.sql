-- +goose Up
-- turnd schema, version 3 (SQLite): the webhook outbox.
--
-- The same table as the PostgreSQL schema (see its comments), adapted as in
-- version 1: times INTEGER unix microseconds (UTC), the body TEXT exactly as
-- sent.
CREATE TABLE webhooks (
    id              TEXT    NOT NULL PRIMARY KEY,
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
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE
) STRICT;

CREATE INDEX webhooks_due ON webhooks (next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL;

-- +goose Down
DROP TABLE webhooks;
