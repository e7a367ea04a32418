-- +goose Up
-- The remote workers the nodes have seen (docs/workers.md, "Seeing the workers"; GET /workers):
-- one row per worker id and node, upserted by that node at most every few seconds while the worker
-- polls or heartbeats there, never by the poll itself. id is the row's unique key (worker id and
-- node, length-prefixed); tenants is the JSON array of the tenants its key is bound to ('[]': an
-- unbound key, which takes every tenant's tasks); tasks_held the tasks it held on that node at
-- the last write. The retention job deletes the rows not seen for seven days.
CREATE TABLE workers (
  id            TEXT NOT NULL PRIMARY KEY,
  worker_id     TEXT NOT NULL,
  node          TEXT NOT NULL,
  key_id        TEXT NOT NULL,
  tenants       TEXT NOT NULL,
  capacity      INTEGER NOT NULL,
  version       TEXT NOT NULL,
  tasks_held    INTEGER NOT NULL,
  first_seen_at TEXT NOT NULL,
  last_seen_at  TEXT NOT NULL
) STRICT;
CREATE INDEX workers_last_seen ON workers (last_seen_at, id);

-- +goose Down
DROP TABLE workers;
