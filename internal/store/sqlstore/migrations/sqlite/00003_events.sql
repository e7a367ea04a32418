-- +goose Up
-- Published events (POST /events). seq is the arrival order; (tenant_id, id) deduplicates a
-- publisher's retries.
CREATE TABLE events (
  seq           INTEGER PRIMARY KEY AUTOINCREMENT,
  id            TEXT NOT NULL,
  tenant_id     TEXT NOT NULL,
  event_type_id TEXT NOT NULL,
  source        TEXT NOT NULL,
  subject       TEXT NOT NULL,
  received_at   TEXT NOT NULL,
  doc           TEXT NOT NULL,
  UNIQUE (tenant_id, id)
) STRICT;
CREATE INDEX events_by_type ON events (tenant_id, event_type_id, received_at);
CREATE INDEX events_by_time ON events (tenant_id, received_at);

-- Suspended workflows waiting on r_wait_event_v1: one row per pending journal entry.
CREATE TABLE event_waits (
  invocation_id TEXT NOT NULL,
  seq           INTEGER NOT NULL,
  tenant_id     TEXT NOT NULL,
  event_type_id TEXT NOT NULL,
  filter        TEXT NOT NULL,
  since         TEXT NOT NULL,
  timeout_at    TEXT,
  PRIMARY KEY (invocation_id, seq)
) STRICT, WITHOUT ROWID;
CREATE INDEX event_waits_by_type ON event_waits (tenant_id, event_type_id);

-- +goose Down
DROP TABLE event_waits;
DROP TABLE events;
