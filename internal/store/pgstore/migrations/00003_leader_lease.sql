-- +goose Up
-- Leader leases (internal/leader): the node holding a lease runs the singleton background loops
-- (schedule firing, retention, the trigger batch flusher, backfills). term moves each time the lease
-- changes hands. The SQLite equivalent is migrations/sqlite/00015_leader_lease.sql.
CREATE TABLE leader_leases (
  name       text COLLATE "C" NOT NULL PRIMARY KEY,
  holder     text COLLATE "C" NOT NULL,
  expires_at text COLLATE "C" NOT NULL,
  term       bigint NOT NULL
);

-- Several nodes: each process adds its usage to its own shard of an hour's row (shard, chosen at
-- random when the store opens), so that the nodes' group-committed batches do not queue on one row
-- lock per tenant, hour and entrypoint; reads sum the shards.
ALTER TABLE usage_hourly ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly DROP CONSTRAINT usage_hourly_pkey;
ALTER TABLE usage_hourly ADD PRIMARY KEY (tenant_id, hour, entrypoint_id, shard);

-- +goose Down
DELETE FROM usage_hourly WHERE shard <> 0; -- loses the other shards' counts: a down migration is for tests
ALTER TABLE usage_hourly DROP CONSTRAINT usage_hourly_pkey;
ALTER TABLE usage_hourly DROP COLUMN shard;
ALTER TABLE usage_hourly ADD PRIMARY KEY (tenant_id, hour, entrypoint_id);
DROP TABLE leader_leases;
