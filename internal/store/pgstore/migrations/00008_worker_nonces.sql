-- +goose Up
-- The nonces of worker envelopes: the PostgreSQL equivalent of the SQLite migration
-- 00019_worker_nonces (internal/store/sqlstore/migrations/sqlite), which explains the table.
CREATE TABLE worker_nonces (
  nonce      text COLLATE "C" NOT NULL PRIMARY KEY,
  expires_at text COLLATE "C" NOT NULL
);
CREATE INDEX worker_nonces_expiry ON worker_nonces (expires_at);

-- +goose Down
DROP TABLE worker_nonces;
