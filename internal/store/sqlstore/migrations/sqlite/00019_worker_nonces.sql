-- +goose Up
-- The nonces of the worker envelopes that change something (polls, results, secret requests:
-- docs/workers.md, "Lifetime and replays"), kept until their envelope expires, so that a captured
-- envelope is refused even after the server restarts. Heartbeats, which change nothing, are
-- remembered in memory only.
CREATE TABLE worker_nonces (
  nonce      TEXT NOT NULL PRIMARY KEY,
  expires_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX worker_nonces_expiry ON worker_nonces (expires_at);

-- +goose Down
DROP TABLE worker_nonces;
