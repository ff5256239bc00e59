-- +goose Up
-- turnd schema, version 5 (PostgreSQL): no foreign keys on the turn hot path.
--
-- Every turn writes a turns row, a row per result and about a dozen ledger
-- lines. Each of those foreign keys cost an index probe of the parent and a
-- KEY SHARE row lock on it (a tuple lock written to the parent's row and to
-- the WAL) for every child row: 15 checks for a turn of four calls, a large
-- share of the turn's database time. They bought nothing the writers do not
-- already guarantee, so they go:
--
--   turns -> sessions:   a turn is inserted by ReceiveTurn, which creates or
--                        locks its session row in the same statement, or by
--                        RecordTurn, which inserts it only together with the
--                        update of its (existing) session row's last_seq.
--   ledger -> sessions:  lines take their seqs from the session row's
--                        last_seq, updated in the same statement: no session
--                        row, no seq, no line.
--   results -> turns:    results are written only by a statement whose gate
--                        (the lease check on the turn row, the completion
--                        update, or the turn insert) returned a row.
--
-- No code deletes sessions or turns, so the ON DELETE CASCADE clauses had
-- nothing to do. The keys of completions and webhooks stay: they are written
-- off the hot path, and the completion store relies on the completions key
-- to refuse a key for an unknown turn.
ALTER TABLE turns DROP CONSTRAINT turns_session_id_fkey;
ALTER TABLE ledger DROP CONSTRAINT ledger_session_id_fkey;
ALTER TABLE results DROP CONSTRAINT results_session_id_turn_id_fkey;

-- +goose Down
-- The keys come back as version 4 had them; rows the writers left without
-- a parent (none, if the guarantees above held) make this fail.
ALTER TABLE turns ADD CONSTRAINT turns_session_id_fkey
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
ALTER TABLE ledger ADD CONSTRAINT ledger_session_id_fkey
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
ALTER TABLE results ADD CONSTRAINT results_session_id_turn_id_fkey
    FOREIGN KEY (session_id, turn_id) REFERENCES turns (session_id, id) ON DELETE CASCADE;
