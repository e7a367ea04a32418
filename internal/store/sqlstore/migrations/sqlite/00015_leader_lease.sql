-- +goose Up
-- Leader leases (internal/leader): the node holding a lease runs the singleton background loops.
-- term moves each time the lease changes hands.
CREATE TABLE leader_leases (
  name       TEXT NOT NULL PRIMARY KEY,
  holder     TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  term       INTEGER NOT NULL
);

-- +goose Down
DROP TABLE leader_leases;
