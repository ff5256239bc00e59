-- +goose Up
-- turnd schema, version 5 (SQLite): no foreign keys on the turn hot path.
--
-- As in PostgreSQL, results no longer reference turns and ledger lines no
-- longer reference sessions: the writers guarantee both (see the PostgreSQL
-- migration of the same version). SQLite cannot drop a constraint, so both
-- tables are rebuilt and their rows copied. Both are children only: with
-- foreign keys enforced, dropping the old tables deletes nothing elsewhere.
-- turns keeps its key to sessions: rebuilding turns, a parent of
-- completions, would cascade its implicit DELETE to them; and one probe per
-- turn is immaterial to the one-process store.
CREATE TABLE results_v5 (
    session_id     TEXT    NOT NULL,
    turn_id        TEXT    NOT NULL,
    idx            INTEGER NOT NULL,
    call_id        TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    effect         TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    output         TEXT,
    error_code     TEXT,
    error_message  TEXT,
    truncated      INTEGER NOT NULL DEFAULT 0,
    original_bytes INTEGER NOT NULL DEFAULT 0,
    original_lines INTEGER NOT NULL DEFAULT 0,
    output_id      TEXT    NOT NULL DEFAULT '',
    attempts       INTEGER NOT NULL DEFAULT 0,
    started_at     INTEGER,
    finished_at    INTEGER,
    replayed_from  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, turn_id, idx)
) STRICT;

INSERT INTO results_v5 (session_id, turn_id, idx, call_id, name, effect, status, output,
    error_code, error_message, truncated, original_bytes, original_lines, output_id,
    attempts, started_at, finished_at, replayed_from)
SELECT session_id, turn_id, idx, call_id, name, effect, status, output,
    error_code, error_message, truncated, original_bytes, original_lines, output_id,
    attempts, started_at, finished_at, replayed_from
FROM results;

DROP TABLE results;
ALTER TABLE results_v5 RENAME TO results;
CREATE INDEX results_call ON results (session_id, call_id);

CREATE TABLE ledger_v5 (
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL DEFAULT '',
    call_id    TEXT    NOT NULL DEFAULT '',
    kind       TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    data       TEXT,
    PRIMARY KEY (session_id, seq)
) STRICT;

INSERT INTO ledger_v5 (session_id, seq, turn_id, call_id, kind, at, data)
SELECT session_id, seq, turn_id, call_id, kind, at, data FROM ledger;

DROP TABLE ledger;
ALTER TABLE ledger_v5 RENAME TO ledger;

-- +goose Down
-- Both tables are rebuilt again, with their keys as version 4 had them.
CREATE TABLE results_v4 (
    session_id     TEXT    NOT NULL,
    turn_id        TEXT    NOT NULL,
    idx            INTEGER NOT NULL,
    call_id        TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    effect         TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    output         TEXT,
    error_code     TEXT,
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

INSERT INTO results_v4 (session_id, turn_id, idx, call_id, name, effect, status, output,
    error_code, error_message, truncated, original_bytes, original_lines, output_id,
    attempts, started_at, finished_at, replayed_from)
SELECT session_id, turn_id, idx, call_id, name, effect, status, output,
    error_code, error_message, truncated, original_bytes, original_lines, output_id,
    attempts, started_at, finished_at, replayed_from
FROM results;

DROP TABLE results;
ALTER TABLE results_v4 RENAME TO results;
CREATE INDEX results_call ON results (session_id, call_id);

CREATE TABLE ledger_v4 (
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL DEFAULT '',
    call_id    TEXT    NOT NULL DEFAULT '',
    kind       TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    data       TEXT,
    PRIMARY KEY (session_id, seq)
) STRICT;

INSERT INTO ledger_v4 (session_id, seq, turn_id, call_id, kind, at, data)
SELECT session_id, seq, turn_id, call_id, kind, at, data FROM ledger;

DROP TABLE ledger;
ALTER TABLE ledger_v4 RENAME TO ledger;
