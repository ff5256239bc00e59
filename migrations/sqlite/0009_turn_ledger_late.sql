-- +goose Up
-- turnd schema, version 9 (SQLite): a turn's ledger rows by index; late
-- deliveries recorded once per distinct payload.
--
-- As in PostgreSQL (see its migration of the same version): a ledger row
-- belongs to one turn, named by turn_id (existing rows take the turn of
-- their first line), and ledger_batches_turn reads a turn's rows in seq
-- order; completions keep the hashes of the late payloads they recorded
-- (late_hashes, 32 bytes each) and count the late deliveries past the cap
-- (late_dropped). SQLite cannot drop a column default without rebuilding
-- the table: every insert names turn_id.
ALTER TABLE ledger_batches ADD COLUMN turn_id TEXT NOT NULL DEFAULT '';
UPDATE ledger_batches SET turn_id = json_extract(lines, '$[0].t');
CREATE INDEX ledger_batches_turn ON ledger_batches (session_id, turn_id, last_seq);

ALTER TABLE completions ADD COLUMN late_hashes BLOB NOT NULL DEFAULT x'';
ALTER TABLE completions ADD COLUMN late_dropped INTEGER NOT NULL DEFAULT 0;

-- +goose Down
DROP INDEX ledger_batches_turn;
ALTER TABLE ledger_batches DROP COLUMN turn_id;
ALTER TABLE completions DROP COLUMN late_hashes;
ALTER TABLE completions DROP COLUMN late_dropped;
