-- +goose Up
-- Registered event types (POST /event-types): scope is the tenant id, or '' for the platform's.
CREATE TABLE event_types (
  scope         TEXT NOT NULL,
  id            TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (scope, id)
) STRICT, WITHOUT ROWID;

-- Event triggers (000 Trigger + 002 event trigger fields). doc is the resource as JSON; the columns
-- are what matching, the batch flusher and the lists find it by. batch_due_at is when the oldest
-- pending event of a batching trigger has waited max_wait_ms (NULL: nothing pending); its partial
-- index is the flusher's only way in.
CREATE TABLE triggers (
  tenant_id     TEXT NOT NULL,
  id            TEXT NOT NULL,
  event_type_id TEXT NOT NULL,
  entrypoint_id TEXT NOT NULL,
  status        TEXT NOT NULL,
  batch_due_at  TEXT,
  revision      INTEGER NOT NULL,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX triggers_match ON triggers (tenant_id, event_type_id) WHERE status = 'active';
CREATE INDEX triggers_created ON triggers (tenant_id, created_at, id);
CREATE INDEX triggers_batch_due ON triggers (batch_due_at) WHERE batch_due_at IS NOT NULL;

-- The invocations triggers started, one row per invocation, written in the transaction that
-- creates it. The unique index on the first event makes each event start at most once per trigger
-- (a batch's events are removed from the pending table in the same transaction). ended_at is set
-- once, when the invocation ends: its outcome is counted once. A redrive of a dead letter is a
-- start of its own (redrive 1), outside the unique index.
CREATE TABLE trigger_starts (
  tenant_id     TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  trigger_id    TEXT NOT NULL,
  first_seq     INTEGER NOT NULL,
  received_at   TEXT NOT NULL,
  started_at    TEXT NOT NULL,
  ended_at      TEXT,
  redrive       INTEGER NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, invocation_id)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX trigger_starts_event ON trigger_starts (tenant_id, trigger_id, first_seq) WHERE redrive = 0;

-- Matching events waiting in a batching trigger's batch, in arrival order (the events' seq).
CREATE TABLE trigger_pending (
  tenant_id     TEXT NOT NULL,
  trigger_id    TEXT NOT NULL,
  event_seq     INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, trigger_id, event_seq)
) STRICT, WITHOUT ROWID;

-- Events whose invocation failed after its retries (the trigger's dead-letter queue).
CREATE TABLE trigger_dead_letters (
  tenant_id     TEXT NOT NULL,
  trigger_id    TEXT NOT NULL,
  id            TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, trigger_id, id)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX trigger_dead_letters_invocation ON trigger_dead_letters (tenant_id, invocation_id) WHERE invocation_id <> '';
CREATE INDEX trigger_dead_letters_created ON trigger_dead_letters (tenant_id, trigger_id, created_at, id);

-- A trigger's metrics, one row per hour: counters and a latency histogram (JSON array of counts
-- per bucket of trigger.LatencyBounds).
CREATE TABLE trigger_metrics (
  tenant_id     TEXT NOT NULL,
  trigger_id    TEXT NOT NULL,
  hour          TEXT NOT NULL,
  received      INTEGER NOT NULL DEFAULT 0,
  filtered_out  INTEGER NOT NULL DEFAULT 0,
  triggered     INTEGER NOT NULL DEFAULT 0,
  succeeded     INTEGER NOT NULL DEFAULT 0,
  failed        INTEGER NOT NULL DEFAULT 0,
  dead_lettered INTEGER NOT NULL DEFAULT 0,
  latency       TEXT NOT NULL DEFAULT '[]',
  PRIMARY KEY (tenant_id, trigger_id, hour)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE trigger_metrics;
DROP TABLE trigger_dead_letters;
DROP TABLE trigger_pending;
DROP TABLE trigger_starts;
DROP TABLE triggers;
DROP TABLE event_types;
