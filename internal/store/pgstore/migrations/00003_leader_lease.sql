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

-- +goose Down
DROP TABLE leader_leases;
