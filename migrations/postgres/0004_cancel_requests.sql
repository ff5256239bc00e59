-- +goose Up
-- turnd schema, version 4 (PostgreSQL): cancel requests across replicas.
--
-- A turn runs on the one replica that holds its lease. A cancel that
-- arrives at another replica records the request here; the owner notices
-- it when it renews its leases (every third of the lease TTL), or at once
-- when the request's turn notification reaches it, and cancels its wave.
-- The first request's time is kept. A nullable column without a default:
-- adding it rewrites nothing, and the previous release ignores it.
ALTER TABLE turns ADD COLUMN cancel_requested_at timestamptz;

-- +goose Down
ALTER TABLE turns DROP COLUMN cancel_requested_at;
