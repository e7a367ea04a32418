-- +goose Up
-- Backfills (004 §7): doc is the resource as JSON. The partial index on state is the driver's way
-- in: it reads running and paused backfills only, never the finished ones.
CREATE TABLE backfills (
  tenant_id     TEXT NOT NULL,
  id            TEXT NOT NULL,
  state         TEXT NOT NULL,
  entrypoint_id TEXT NOT NULL,
  schedule_id   TEXT NOT NULL,
  revision      INTEGER NOT NULL,
  created_at    TEXT NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX backfills_active ON backfills (state) WHERE state IN ('running', 'paused');
CREATE INDEX backfills_created ON backfills (tenant_id, created_at, id);

-- One row per instant. state: pending | running | completed | failed | skipped. The index serves
-- the driver's questions: the chunks with pending or running partitions, and its running ones.
CREATE TABLE backfill_partitions (
  tenant_id     TEXT NOT NULL,
  backfill_id   TEXT NOT NULL,
  id            TEXT NOT NULL,
  seq           INTEGER NOT NULL,
  scheduled_at  TEXT NOT NULL,
  chunk         INTEGER NOT NULL,
  state         TEXT NOT NULL,
  invocation_id TEXT,
  attempts      INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, backfill_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX backfill_partitions_state ON backfill_partitions (tenant_id, backfill_id, state, chunk);

-- +goose Down
DROP TABLE backfill_partitions;
DROP TABLE backfills;
