-- +goose Up
-- turnd schema, version 8 (PostgreSQL): ids compare as bytes (COLLATE "C").
--
-- Every text column that a btree index keys on holds an id or a name
-- chosen by a client or by turnd: opaque strings, for which a language's
-- ordering means nothing. Under the database's default collation (say
-- en_US.UTF-8, or an ICU locale) every comparison of an index descent goes
-- through the locale's collation routine; under "C" it is a byte
-- comparison. A four-call turn makes a dozen such descents (its turn, its
-- results, its ledger row, the answered-call probes). On an ICU en-US
-- database, 400,000 inserts into a table keyed like results took 3.5 s
-- against 2.4 s with the columns in "C" (BENCHMARKS.md, sixth round). A database
-- created with the C locale already compared this way, and nothing changes
-- there but the declared collation. The foreign keys of completions and
-- webhooks to turns get "C" on their side too, so that both sides of each
-- key agree.
--
-- Equality is the same under both collations (both are deterministic), so
-- no lookup finds anything else; only the order of ids changes, which
-- breaks ties in a few listings (byte order, as the embedded store's). A
-- comparison of one of these columns with a value of the default collation
-- (a parameter, an unnest of one) is made in "C", so the indexes serve it.
--
-- Changing a column's collation does not rewrite its table, but every
-- index on the column is rebuilt, and the foreign keys re-added, under an
-- exclusive lock of every table named here: on a large database, run
-- `turnd migrate` in a quiet moment.
ALTER TABLE sessions ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE turns
    ALTER COLUMN session_id TYPE text COLLATE "C",
    ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE results
    ALTER COLUMN session_id TYPE text COLLATE "C",
    ALTER COLUMN call_id TYPE text COLLATE "C",
    ALTER COLUMN turn_id TYPE text COLLATE "C";
ALTER TABLE ledger_batches ALTER COLUMN session_id TYPE text COLLATE "C";
ALTER TABLE outputs ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE completions
    ALTER COLUMN session_id TYPE text COLLATE "C",
    ALTER COLUMN turn_id TYPE text COLLATE "C";
ALTER TABLE webhooks
    ALTER COLUMN id TYPE text COLLATE "C",
    ALTER COLUMN session_id TYPE text COLLATE "C",
    ALTER COLUMN turn_id TYPE text COLLATE "C";
ALTER TABLE settings ALTER COLUMN name TYPE text COLLATE "C";

-- +goose Down
-- The columns take the database's default collation again.
ALTER TABLE sessions ALTER COLUMN id TYPE text COLLATE "default";
ALTER TABLE turns
    ALTER COLUMN session_id TYPE text COLLATE "default",
    ALTER COLUMN id TYPE text COLLATE "default";
ALTER TABLE results
    ALTER COLUMN session_id TYPE text COLLATE "default",
    ALTER COLUMN call_id TYPE text COLLATE "default",
    ALTER COLUMN turn_id TYPE text COLLATE "default";
ALTER TABLE ledger_batches ALTER COLUMN session_id TYPE text COLLATE "default";
ALTER TABLE outputs ALTER COLUMN id TYPE text COLLATE "default";
ALTER TABLE completions
    ALTER COLUMN session_id TYPE text COLLATE "default",
    ALTER COLUMN turn_id TYPE text COLLATE "default";
ALTER TABLE webhooks
    ALTER COLUMN id TYPE text COLLATE "default",
    ALTER COLUMN session_id TYPE text COLLATE "default",
    ALTER COLUMN turn_id TYPE text COLLATE "default";
ALTER TABLE settings ALTER COLUMN name TYPE text COLLATE "default";
