-- +goose Up
-- turnd schema, version 7 (PostgreSQL): one index on results instead of two.
--
-- results had a primary key on (session_id, turn_id, idx), for the upserts
-- of the ordinary path and for reading a turn's results, and results_call on
-- (session_id, call_id), for finding a session's answered call ids. Every
-- result paid two index entries, and a turn of four calls eight of the ten
-- that recording it writes. One key serves both now:
-- (session_id, call_id, turn_id, idx).
--
--   answered call ids:  the key's prefix (session_id, call_id), as before;
--   a turn's results:   one probe per call id of the turn, whose ids the
--                       turn row holds (turns.calls); a call's results are
--                       always written under that call's id;
--   upserts:            ON CONFLICT on the four columns. A call's index and
--                       id never change within its turn, so the new key is
--                       unique exactly where the old one was.
--
-- Binaries before this version upsert ON CONFLICT (session_id, turn_id,
-- idx), which no longer names a unique index: stop them before migrating,
-- as for version 6.
CREATE UNIQUE INDEX results_key ON results (session_id, call_id, turn_id, idx);
ALTER TABLE results DROP CONSTRAINT results_pkey;
ALTER TABLE results ADD CONSTRAINT results_pkey PRIMARY KEY USING INDEX results_key;
DROP INDEX results_call;

-- +goose Down
CREATE INDEX results_call ON results (session_id, call_id);
CREATE UNIQUE INDEX results_turn_key ON results (session_id, turn_id, idx);
ALTER TABLE results DROP CONSTRAINT results_pkey;
ALTER TABLE results ADD CONSTRAINT results_pkey PRIMARY KEY USING INDEX results_turn_key;
