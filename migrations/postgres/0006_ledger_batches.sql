-- +goose Up
-- turnd schema, version 6 (PostgreSQL): one ledger row per write.
--
-- A write appends its lines (a turn's dozen, when it is recorded whole) as
-- ONE row: the session, the seqs of its first and last line, and the lines
-- as a JSON array in order (store/internal/codec/ledger.go describes the
-- format). Line i of a row has seq first_seq + i. Seqs are still allocated
-- from sessions.last_seq in the writing transaction, so rows of a session
-- never overlap and the ledger stays gap-free; the API still reads single
-- lines. Rows are keyed by their last seq: a page after seq N starts at the
-- first row whose last_seq exceeds N.
--
-- The existing lines move over as rows of one line each. The line data is
-- kept as a JSON string of its text, so that it round-trips byte for byte;
-- times become unix microseconds (the column's precision).
CREATE TABLE ledger_batches (
    session_id text   NOT NULL,
    last_seq   bigint NOT NULL,
    first_seq  bigint NOT NULL,
    lines      json   NOT NULL,
    PRIMARY KEY (session_id, last_seq)
);

INSERT INTO ledger_batches (session_id, last_seq, first_seq, lines)
SELECT session_id, seq, seq,
    ('[{"t":' || to_json(turn_id)::text || ',"c":' || to_json(call_id)::text || ',"k":' || to_json(kind)::text
        || ',"a":' || ((extract(epoch FROM at) * 1000000)::bigint)::text
        || CASE WHEN data IS NULL THEN '' ELSE ',"d":' || to_json(data::text)::text END
        || '}]')::json
FROM ledger;

DROP TABLE ledger;

-- +goose Down
-- Every line of every row becomes a ledger row again: line i of a row has
-- seq first_seq + i, its time comes back from unix microseconds exactly,
-- and its data from the JSON string of its text.
CREATE TABLE ledger (
    session_id text        NOT NULL,
    seq        bigint      NOT NULL,
    turn_id    text        NOT NULL DEFAULT '',
    call_id    text        NOT NULL DEFAULT '',
    kind       text        NOT NULL,
    at         timestamptz NOT NULL,
    data       json,
    PRIMARY KEY (session_id, seq)
);

INSERT INTO ledger (session_id, seq, turn_id, call_id, kind, at, data)
SELECT b.session_id, b.first_seq + l.i - 1, l.line->>'t', l.line->>'c', l.line->>'k',
    timestamptz 'epoch' + (l.line->>'a')::bigint * interval '1 microsecond',
    (l.line->>'d')::json
FROM ledger_batches b
CROSS JOIN LATERAL json_array_elements(b.lines) WITH ORDINALITY AS l (line, i);

DROP TABLE ledger_batches;
