-- +goose Up
-- turnd schema, version 12 (PostgreSQL): every table keyed by its session.
--
-- Past one database, turnd's schema is distributed by session on Citus
-- (docs/citus.md): each table is sharded by its session id and co-located
-- with the others, so that a session's rows of every table live on one
-- node and each of turnd's statements about one session runs there alone.
-- That needs every primary key, unique constraint and foreign key to
-- include the session id. sessions (by id), turns, results and
-- ledger_batches already had it; outputs, completions and webhooks were
-- keyed by an id alone and are keyed by (session_id, id) now. The schema
-- is the same on plain PostgreSQL, which uses it as it is.
--
-- Completion keys and output ids issued from this version on carry their
-- session (completion.Key, turn's output ids), so a lookup names it. Those
-- issued before do not: legacy_keys and legacy_outputs map each of them,
-- copied here once, to its session, so that an old key or output id still
-- finds its row with one lookup of a small table that nothing writes again
-- (a reference table on Citus, present on every node). Binaries before
-- this version upsert completions ON CONFLICT (key_hash), which no longer
-- names a unique index: stop them before migrating, as for versions 6 and 7.
--
-- outputs.session_id takes the "C" collation of every other indexed id
-- (version 8): the distribution columns of co-located tables must agree in
-- type and collation.
ALTER TABLE outputs ALTER COLUMN session_id TYPE text COLLATE "C";
ALTER TABLE outputs DROP CONSTRAINT outputs_pkey;
ALTER TABLE outputs ADD CONSTRAINT outputs_pkey PRIMARY KEY (session_id, id);

ALTER TABLE completions DROP CONSTRAINT completions_pkey;
ALTER TABLE completions ADD CONSTRAINT completions_pkey PRIMARY KEY (session_id, key_hash);

ALTER TABLE webhooks DROP CONSTRAINT webhooks_pkey;
ALTER TABLE webhooks ADD CONSTRAINT webhooks_pkey PRIMARY KEY (session_id, id);

CREATE TABLE legacy_keys (
    key_hash   bytea PRIMARY KEY,
    session_id text COLLATE "C" NOT NULL
);
INSERT INTO legacy_keys (key_hash, session_id) SELECT key_hash, session_id FROM completions;

CREATE TABLE legacy_outputs (
    id         text COLLATE "C" PRIMARY KEY,
    session_id text COLLATE "C" NOT NULL
);
INSERT INTO legacy_outputs (id, session_id) SELECT id, session_id FROM outputs;

-- +goose Down
-- The keys come back as version 11 had them. Ids and key hashes are
-- unique on their own (random, and SHA-256 of keys that differ), so the
-- rows of this version fit the old keys. Completion keys and output ids
-- issued at this version are not understood by binaries before it:
-- deliveries to such keys answer 404 after a downgrade.
DROP TABLE legacy_outputs;
DROP TABLE legacy_keys;

ALTER TABLE webhooks DROP CONSTRAINT webhooks_pkey;
ALTER TABLE webhooks ADD CONSTRAINT webhooks_pkey PRIMARY KEY (id);

ALTER TABLE completions DROP CONSTRAINT completions_pkey;
ALTER TABLE completions ADD CONSTRAINT completions_pkey PRIMARY KEY (key_hash);

ALTER TABLE outputs DROP CONSTRAINT outputs_pkey;
ALTER TABLE outputs ADD CONSTRAINT outputs_pkey PRIMARY KEY (id);
ALTER TABLE outputs ALTER COLUMN session_id TYPE text COLLATE "default";
