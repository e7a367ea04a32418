-- +goose Up
-- The remote workers the nodes have seen: the PostgreSQL equivalent of the SQLite migration
-- 00021_workers (internal/store/sqlstore/migrations/sqlite), which explains the table.
CREATE TABLE workers (
  id            text COLLATE "C" NOT NULL PRIMARY KEY,
  worker_id     text COLLATE "C" NOT NULL,
  node          text COLLATE "C" NOT NULL,
  key_id        text COLLATE "C" NOT NULL,
  tenants       text NOT NULL,
  capacity      bigint NOT NULL,
  version       text COLLATE "C" NOT NULL,
  tasks_held    bigint NOT NULL,
  first_seen_at text COLLATE "C" NOT NULL,
  last_seen_at  text COLLATE "C" NOT NULL
);
CREATE INDEX workers_last_seen ON workers (last_seen_at, id);

-- +goose Down
DROP TABLE workers;
