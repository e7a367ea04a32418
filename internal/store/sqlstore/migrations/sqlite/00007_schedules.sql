-- +goose Up
-- Schedules (000 + 002). doc is the resource as JSON; the columns are what the firer and the
-- lists find it by. due_at is when the firer looks at it next (NULL: paused or disabled), and the
-- partial index on it is the firer's only way in: it never scans all schedules.
CREATE TABLE schedules (
  tenant_id     TEXT NOT NULL,
  id            TEXT NOT NULL,
  entrypoint_id TEXT NOT NULL,
  name          TEXT NOT NULL,
  status        TEXT NOT NULL,
  next_run_at   TEXT,
  due_at        TEXT,
  revision      INTEGER NOT NULL,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX schedules_due ON schedules (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX schedules_created ON schedules (tenant_id, created_at, id);

-- Each instant of a schedule and what became of it. The unique index makes an instant fire at most
-- once (manual triggers are not instants); it is written in the transaction that creates the run's
-- invocation.
CREATE TABLE schedule_runs (
  tenant_id     TEXT NOT NULL,
  schedule_id   TEXT NOT NULL,
  id            TEXT NOT NULL,
  scheduled_at  TEXT NOT NULL,
  kind          TEXT NOT NULL,
  state         TEXT NOT NULL,
  invocation_id TEXT,
  recorded_at   TEXT NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, schedule_id, id)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX schedule_runs_instant ON schedule_runs (tenant_id, schedule_id, scheduled_at) WHERE kind <> 'manual';
CREATE INDEX schedule_runs_pending ON schedule_runs (tenant_id, schedule_id, scheduled_at) WHERE state = 'pending';
-- The retention job purges runs by age (retention.execution_history_days).
CREATE INDEX schedule_runs_recorded ON schedule_runs (tenant_id, recorded_at);

-- +goose Down
DROP TABLE schedule_runs;
DROP TABLE schedules;
