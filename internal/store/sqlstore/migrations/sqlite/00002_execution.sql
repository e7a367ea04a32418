-- +goose Up
-- The queue is the invocations table itself (architecture: "the queue is a table"): available_at is
-- set while an invocation waits to run (now, or a retry's backoff), a lease marks who is running it.
ALTER TABLE invocations ADD COLUMN available_at TEXT;
ALTER TABLE invocations ADD COLUMN lease_owner TEXT;
ALTER TABLE invocations ADD COLUMN lease_expires_at TEXT;
CREATE INDEX invocations_runnable ON invocations (available_at) WHERE available_at IS NOT NULL;
CREATE INDEX invocations_leased ON invocations (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX invocations_tenant_inflight ON invocations (tenant_id, status);

-- Idempotency-Key deduplication (BR-134): one row per (tenant, scope, key) inside the window.
CREATE TABLE idempotency_keys (
  tenant_id     TEXT NOT NULL,
  scope         TEXT NOT NULL,
  key           TEXT NOT NULL,
  request_hash  TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  expires_at    TEXT NOT NULL,
  PRIMARY KEY (tenant_id, scope, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- Response cache (000 "Response Caching"): the key tuple, hashed, points at the original invocation.
CREATE TABLE response_cache (
  cache_key     TEXT PRIMARY KEY,
  tenant_id     TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  expires_at    TEXT NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX response_cache_expiry ON response_cache (expires_at);

-- +goose Down
DROP TABLE response_cache;
DROP TABLE idempotency_keys;
DROP INDEX invocations_tenant_inflight;
DROP INDEX invocations_leased;
DROP INDEX invocations_runnable;
ALTER TABLE invocations DROP COLUMN lease_expires_at;
ALTER TABLE invocations DROP COLUMN lease_owner;
ALTER TABLE invocations DROP COLUMN available_at;
