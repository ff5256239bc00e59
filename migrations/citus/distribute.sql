-- Distributes turnd's schema on Citus (docs/citus.md): every table that
-- holds a session's rows is sharded by the session id and co-located with
-- sessions, so that a session's rows of every table share one shard group
-- (one node), and each statement about one session runs there alone; the
-- tables read by key alone are reference tables, copied to every node.
-- goose's own table stays on the coordinator.
--
-- Run on the coordinator, in the schema turnd uses (the connection's
-- search_path), after `turnd migrate`; `turnd migrate --citus` runs it.
-- Each line does its table only while it is not distributed yet, so the
-- file may run again (after a later migration, say); existing rows move
-- to the shards. Sessions come first: the others are co-located with them,
-- and the foreign keys of completions and webhooks need turns distributed.
SELECT create_distributed_table('sessions', 'id') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass);
SELECT create_distributed_table('turns', 'session_id', colocate_with => 'sessions') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'turns'::regclass);
SELECT create_distributed_table('results', 'session_id', colocate_with => 'sessions') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'results'::regclass);
SELECT create_distributed_table('ledger_batches', 'session_id', colocate_with => 'sessions') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'ledger_batches'::regclass);
SELECT create_distributed_table('outputs', 'session_id', colocate_with => 'sessions') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'outputs'::regclass);
SELECT create_distributed_table('completions', 'session_id', colocate_with => 'sessions') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'completions'::regclass);
SELECT create_distributed_table('webhooks', 'session_id', colocate_with => 'sessions') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'webhooks'::regclass);
SELECT create_reference_table('settings') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'settings'::regclass);
SELECT create_reference_table('legacy_keys') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'legacy_keys'::regclass);
SELECT create_reference_table('legacy_outputs') WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'legacy_outputs'::regclass);
