-- +goose Up
-- turnd schema, version 6 (SQLite): one ledger row per write.
--
-- As in PostgreSQL (see its migration of the same version): a write's lines
-- are one row, the lines a JSON array in order, line i with seq
-- first_seq + i; the existing lines move over as rows of one line. at is
-- already INTEGER unix microseconds; the data is kept as a JSON string of
-- its text (json_quote of the TEXT column), byte for byte.
CREATE TABLE ledger_batches (
    session_id TEXT    NOT NULL,
    last_seq   INTEGER NOT NULL,
    first_seq  INTEGER NOT NULL,
    lines      TEXT    NOT NULL,
    PRIMARY KEY (session_id, last_seq)
) STRICT;

INSERT INTO ledger_batches (session_id, last_seq, first_seq, lines)
SELECT session_id, seq, seq,
    '[{"t":' || json_quote(turn_id) || ',"c":' || json_quote(call_id) || ',"k":' || json_quote(kind)
        || ',"a":' || at
        || CASE WHEN data IS NULL THEN '' ELSE ',"d":' || json_quote(data) END
        || '}]'
FROM ledger;

DROP TABLE ledger;

-- +goose Down
-- Every line of every row becomes a ledger row again (as in PostgreSQL):
-- line i of a row has seq first_seq + i, its data the text of its JSON
-- string.
CREATE TABLE ledger (
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL DEFAULT '',
    call_id    TEXT    NOT NULL DEFAULT '',
    kind       TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    data       TEXT,
    PRIMARY KEY (session_id, seq)
) STRICT;

INSERT INTO ledger (session_id, seq, turn_id, call_id, kind, at, data)
SELECT b.session_id, b.first_seq + l.key, json_extract(l.value, '$.t'), json_extract(l.value, '$.c'),
    json_extract(l.value, '$.k'), json_extract(l.value, '$.a'), json_extract(l.value, '$.d')
FROM ledger_batches b, json_each(b.lines) l;

DROP TABLE ledger_batches;
