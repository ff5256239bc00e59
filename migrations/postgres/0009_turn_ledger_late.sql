-- +goose Up
-- turnd schema, version 9 (PostgreSQL): a turn's ledger rows by index;
-- late deliveries recorded once per distinct payload.
--
-- Every write appends the lines of one turn (store/internal/codec checks
-- that a line names the turn it is written under), so a ledger row belongs
-- to one turn: turn_id names it, and ledger_batches_turn reads a turn's
-- rows in seq order without scanning its session's (the event stream of
-- a turn). Existing rows take the turn of their first line. The backfill
-- rewrites every ledger row: on a large database, run `turnd migrate` in a
-- quiet moment.
--
-- late_hashes holds the SHA-256 of each distinct payload recorded as a
-- completion_late line for the key (concatenated, 32 bytes each, at most
-- turn.MaxLateLines of them); late_dropped counts late deliveries of other
-- payloads that came after that cap and were not recorded.
ALTER TABLE ledger_batches ADD COLUMN turn_id text COLLATE "C" NOT NULL DEFAULT '';
UPDATE ledger_batches SET turn_id = lines->0->>'t';
ALTER TABLE ledger_batches ALTER COLUMN turn_id DROP DEFAULT;
CREATE INDEX ledger_batches_turn ON ledger_batches (session_id, turn_id, last_seq);

ALTER TABLE completions
    ADD COLUMN late_hashes bytea NOT NULL DEFAULT '',
    ADD COLUMN late_dropped bigint NOT NULL DEFAULT 0;

-- +goose Down
DROP INDEX ledger_batches_turn;
ALTER TABLE ledger_batches DROP COLUMN turn_id;
ALTER TABLE completions
    DROP COLUMN late_hashes,
    DROP COLUMN late_dropped;
