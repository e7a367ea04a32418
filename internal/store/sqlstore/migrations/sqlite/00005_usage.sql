-- +goose Up
-- Usage aggregates (000 "Quota Usage API", 004 §22): a projection of the invocation event log,
-- written in the same transaction as the events (sqlstore.tx.Append). One row per tenant, UTC hour
-- (hours since the Unix epoch) and exact entrypoint version (GTS id); the counters are
-- invocation.Usage's. GET /usage/history sums them into hourly, daily or weekly buckets.
CREATE TABLE usage_hourly (
  tenant_id          TEXT NOT NULL,
  hour               INTEGER NOT NULL,
  entrypoint_id      TEXT NOT NULL,
  invocations        INTEGER NOT NULL DEFAULT 0,
  succeeded          INTEGER NOT NULL DEFAULT 0,
  failed             INTEGER NOT NULL DEFAULT 0,
  canceled           INTEGER NOT NULL DEFAULT 0,
  dead_lettered      INTEGER NOT NULL DEFAULT 0,
  compensated        INTEGER NOT NULL DEFAULT 0,
  executions         INTEGER NOT NULL DEFAULT 0,
  duration_ms        INTEGER NOT NULL DEFAULT 0,
  billed_duration_ms INTEGER NOT NULL DEFAULT 0,
  cpu_time_ms        INTEGER NOT NULL DEFAULT 0,
  memory_mb_ms       INTEGER NOT NULL DEFAULT 0,
  egress_bytes       INTEGER NOT NULL DEFAULT 0,
  cost               REAL NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, hour, entrypoint_id)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE usage_hourly;
