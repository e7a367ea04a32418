-- +goose Up
-- The PostgreSQL schema, equivalent to the SQLite migrations 00001-00010 (internal/store/sqlstore/
-- migrations/sqlite), consolidated. The same columns with the same meaning, so that both stores
-- share their queries' shape:
--   - times are UTC text in the fixed-width form 2006-01-02T15:04:05.000000Z, so text order is time
--     order (and equality and ranges compare exactly as on SQLite);
--   - every text column is COLLATE "C" (byte order): lists, keyset cursors and the dispatcher's walks
--     order exactly as SQLite's BINARY collation, whatever the database's default collation;
--   - JSON documents are text, returned verbatim (numbers are never reformatted, keys never
--     reordered), like SQLite's TEXT; the few queries that look inside one cast it to jsonb;
--   - booleans are integers 0/1, as the shared query code binds them.
CREATE TABLE tenants (
  tenant_id  text COLLATE "C" PRIMARY KEY,
  enabled    integer NOT NULL,
  policy     text NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  updated_at text COLLATE "C" NOT NULL
);

CREATE TABLE tokens (
  id          text COLLATE "C" PRIMARY KEY,
  tenant_id   text COLLATE "C" NOT NULL,
  subject_id  text COLLATE "C" NOT NULL,
  roles       text NOT NULL,
  description text NOT NULL DEFAULT '',
  hash        text COLLATE "C" NOT NULL UNIQUE,
  created_at  text COLLATE "C" NOT NULL,
  created_by  text COLLATE "C" NOT NULL,
  expires_at  text COLLATE "C",
  revoked_at  text COLLATE "C"
);
CREATE INDEX tokens_tenant_created ON tokens (tenant_id, created_at, id);

CREATE TABLE entrypoints (
  id         text COLLATE "C" PRIMARY KEY,
  tenant_id  text COLLATE "C" NOT NULL,
  gts_id     text COLLATE "C" NOT NULL,
  family     text COLLATE "C" NOT NULL,
  major      bigint NOT NULL,
  minor      bigint NOT NULL,
  has_minor  integer NOT NULL,
  kind       text COLLATE "C" NOT NULL,
  owner_type text COLLATE "C" NOT NULL,
  owner_id   text COLLATE "C" NOT NULL,
  shared     integer NOT NULL,
  status     text COLLATE "C" NOT NULL,
  version    text COLLATE "C" NOT NULL,
  title      text COLLATE "C" NOT NULL,
  tags       text NOT NULL,
  adapter    text COLLATE "C" NOT NULL,
  definition text NOT NULL,
  meta       text NOT NULL,
  revision   bigint NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  updated_at text COLLATE "C" NOT NULL,
  UNIQUE (tenant_id, gts_id),
  UNIQUE (tenant_id, family, major, minor)
);
CREATE INDEX entrypoints_gts ON entrypoints (gts_id);
CREATE INDEX entrypoints_family ON entrypoints (family, major, minor);
CREATE INDEX entrypoints_tenant_created ON entrypoints (tenant_id, created_at, id);
CREATE INDEX entrypoints_system ON entrypoints (owner_type) WHERE owner_type = 'system';

-- The queue is the invocations table itself: available_at is set while an invocation waits to run,
-- a lease marks who is running it. Claims lock the rows they take (FOR UPDATE SKIP LOCKED).
CREATE TABLE invocations (
  id                  text COLLATE "C" PRIMARY KEY,
  tenant_id           text COLLATE "C" NOT NULL,
  entrypoint_ref      text COLLATE "C" NOT NULL,
  entrypoint_id       text COLLATE "C" NOT NULL,
  status              text COLLATE "C" NOT NULL,
  mode                text COLLATE "C" NOT NULL,
  correlation_id      text COLLATE "C" NOT NULL,
  last_seq            bigint NOT NULL,
  record              text NOT NULL,
  created_at          text COLLATE "C" NOT NULL,
  updated_at          text COLLATE "C" NOT NULL,
  available_at        text COLLATE "C",
  lease_owner         text COLLATE "C",
  lease_expires_at    text COLLATE "C",
  history_seq         bigint,
  history_bytes       bigint,
  history_finished_at text COLLATE "C",
  subject_id          text COLLATE "C" NOT NULL DEFAULT '',
  entrypoint_owner    text COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX invocations_tenant_created ON invocations (tenant_id, created_at, id);
CREATE INDEX invocations_entrypoint_status ON invocations (entrypoint_ref, status);
CREATE INDEX invocations_runnable ON invocations (available_at) WHERE available_at IS NOT NULL;
CREATE INDEX invocations_leased ON invocations (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX invocations_queue_tenant ON invocations (tenant_id, available_at) WHERE available_at IS NOT NULL;
CREATE INDEX invocations_queue_entrypoint ON invocations (tenant_id, entrypoint_ref, available_at) WHERE available_at IS NOT NULL;
CREATE INDEX invocations_tenant_status_ref ON invocations (tenant_id, status, entrypoint_ref);
CREATE INDEX invocations_unmeasured ON invocations (tenant_id)
  WHERE (status = 'succeeded' OR status = 'failed' OR status = 'canceled' OR status = 'compensated' OR status = 'dead_lettered')
    AND history_seq IS NULL;
CREATE INDEX invocations_reopened ON invocations (tenant_id)
  WHERE (status = 'queued' OR status = 'running' OR status = 'suspended' OR status = 'compensating')
    AND history_seq IS NOT NULL;
CREATE INDEX invocations_history_age ON invocations (tenant_id, history_finished_at)
  WHERE history_finished_at IS NOT NULL;

CREATE TABLE invocation_events (
  invocation_id   text COLLATE "C" NOT NULL REFERENCES invocations (id) ON DELETE CASCADE,
  seq             bigint NOT NULL,
  type            text COLLATE "C" NOT NULL,
  data            text,
  idempotency_key text COLLATE "C" NOT NULL,
  engine_attempt  bigint NOT NULL,
  logical_attempt bigint NOT NULL,
  at              text COLLATE "C" NOT NULL,
  PRIMARY KEY (invocation_id, seq),
  UNIQUE (invocation_id, idempotency_key)
);

CREATE TABLE audit_events (
  id             text COLLATE "C" PRIMARY KEY,
  tenant_id      text COLLATE "C" NOT NULL,
  type           text COLLATE "C" NOT NULL,
  actor_id       text COLLATE "C" NOT NULL,
  resource_type  text COLLATE "C" NOT NULL,
  resource_id    text COLLATE "C" NOT NULL,
  correlation_id text COLLATE "C" NOT NULL,
  at             text COLLATE "C" NOT NULL,
  details        text
);
CREATE INDEX audit_events_tenant_at ON audit_events (tenant_id, at, id);

-- JSON helpers for the few queries that look inside a stored document. A document PostgreSQL
-- cannot parse yields NULL (or an empty array) instead of failing the whole statement, as SQLite's
-- json_valid guards do: one bad row must never fail a list or a retention batch.
-- +goose StatementBegin
CREATE FUNCTION lark_json_field(doc text, field text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN doc::jsonb ->> field;
EXCEPTION WHEN others THEN
  RETURN NULL;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION lark_json_array(doc text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  j jsonb;
BEGIN
  j := doc::jsonb;
  IF jsonb_typeof(j) = 'array' THEN
    RETURN j;
  END IF;
  RETURN '[]'::jsonb;
EXCEPTION WHEN others THEN
  RETURN '[]'::jsonb;
END;
$$;
-- +goose StatementEnd

-- The audit log is append-only: no UPDATE, ever. Its only DELETE is the retention purge.
-- +goose StatementBegin
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_events is append-only';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

CREATE TABLE idempotency_keys (
  tenant_id     text COLLATE "C" NOT NULL,
  scope         text COLLATE "C" NOT NULL,
  key           text COLLATE "C" NOT NULL,
  request_hash  text COLLATE "C" NOT NULL,
  invocation_id text COLLATE "C" NOT NULL,
  created_at    text COLLATE "C" NOT NULL,
  expires_at    text COLLATE "C" NOT NULL,
  PRIMARY KEY (tenant_id, scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
CREATE INDEX idempotency_keys_invocation ON idempotency_keys (invocation_id);

CREATE TABLE response_cache (
  cache_key     text COLLATE "C" PRIMARY KEY,
  tenant_id     text COLLATE "C" NOT NULL,
  invocation_id text COLLATE "C" NOT NULL,
  expires_at    text COLLATE "C" NOT NULL
);
CREATE INDEX response_cache_expiry ON response_cache (expires_at);
CREATE INDEX response_cache_invocation ON response_cache (invocation_id);

-- Published events. seq is the arrival order; (tenant_id, id) deduplicates a publisher's retries.
CREATE TABLE events (
  seq           bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  id            text COLLATE "C" NOT NULL,
  tenant_id     text COLLATE "C" NOT NULL,
  event_type_id text COLLATE "C" NOT NULL,
  source        text COLLATE "C" NOT NULL,
  subject       text COLLATE "C" NOT NULL,
  received_at   text COLLATE "C" NOT NULL,
  doc           text NOT NULL,
  UNIQUE (tenant_id, id)
);
CREATE INDEX events_by_type ON events (tenant_id, event_type_id, received_at);
CREATE INDEX events_by_time ON events (tenant_id, received_at);

CREATE TABLE event_waits (
  invocation_id text COLLATE "C" NOT NULL,
  seq           bigint NOT NULL,
  tenant_id     text COLLATE "C" NOT NULL,
  event_type_id text COLLATE "C" NOT NULL,
  filter        text NOT NULL,
  since         text COLLATE "C" NOT NULL,
  timeout_at    text COLLATE "C",
  PRIMARY KEY (invocation_id, seq)
);
CREATE INDEX event_waits_by_type ON event_waits (tenant_id, event_type_id);

CREATE TABLE event_consumptions (
  invocation_id text COLLATE "C" NOT NULL,
  event_seq     bigint NOT NULL,
  tenant_id     text COLLATE "C" NOT NULL,
  PRIMARY KEY (invocation_id, event_seq)
);

CREATE TABLE usage_hourly (
  tenant_id          text COLLATE "C" NOT NULL,
  hour               bigint NOT NULL,
  entrypoint_id      text COLLATE "C" NOT NULL,
  invocations        bigint NOT NULL DEFAULT 0,
  succeeded          bigint NOT NULL DEFAULT 0,
  failed             bigint NOT NULL DEFAULT 0,
  canceled           bigint NOT NULL DEFAULT 0,
  dead_lettered      bigint NOT NULL DEFAULT 0,
  compensated        bigint NOT NULL DEFAULT 0,
  executions         bigint NOT NULL DEFAULT 0,
  duration_ms        bigint NOT NULL DEFAULT 0,
  billed_duration_ms bigint NOT NULL DEFAULT 0,
  cpu_time_ms        bigint NOT NULL DEFAULT 0,
  memory_mb_ms       bigint NOT NULL DEFAULT 0,
  egress_bytes       bigint NOT NULL DEFAULT 0,
  cost               double precision NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, hour, entrypoint_id)
);

CREATE TABLE tenant_history (
  tenant_id text COLLATE "C" PRIMARY KEY,
  bytes     bigint NOT NULL
);

CREATE TABLE schedules (
  tenant_id     text COLLATE "C" NOT NULL,
  id            text COLLATE "C" NOT NULL,
  entrypoint_id text COLLATE "C" NOT NULL,
  name          text COLLATE "C" NOT NULL,
  status        text COLLATE "C" NOT NULL,
  next_run_at   text COLLATE "C",
  due_at        text COLLATE "C",
  revision      bigint NOT NULL,
  created_at    text COLLATE "C" NOT NULL,
  updated_at    text COLLATE "C" NOT NULL,
  doc           text NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
CREATE INDEX schedules_due ON schedules (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX schedules_created ON schedules (tenant_id, created_at, id);

CREATE TABLE schedule_runs (
  tenant_id     text COLLATE "C" NOT NULL,
  schedule_id   text COLLATE "C" NOT NULL,
  id            text COLLATE "C" NOT NULL,
  scheduled_at  text COLLATE "C" NOT NULL,
  kind          text COLLATE "C" NOT NULL,
  state         text COLLATE "C" NOT NULL,
  invocation_id text COLLATE "C",
  recorded_at   text COLLATE "C" NOT NULL,
  doc           text NOT NULL,
  PRIMARY KEY (tenant_id, schedule_id, id)
);
CREATE UNIQUE INDEX schedule_runs_instant ON schedule_runs (tenant_id, schedule_id, scheduled_at) WHERE kind <> 'manual';
CREATE INDEX schedule_runs_pending ON schedule_runs (tenant_id, schedule_id, scheduled_at) WHERE state = 'pending';
CREATE INDEX schedule_runs_recorded ON schedule_runs (tenant_id, recorded_at);

CREATE TABLE backfills (
  tenant_id     text COLLATE "C" NOT NULL,
  id            text COLLATE "C" NOT NULL,
  state         text COLLATE "C" NOT NULL,
  entrypoint_id text COLLATE "C" NOT NULL,
  schedule_id   text COLLATE "C" NOT NULL,
  revision      bigint NOT NULL,
  created_at    text COLLATE "C" NOT NULL,
  doc           text NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
CREATE INDEX backfills_active ON backfills (state) WHERE state IN ('running', 'paused');
CREATE INDEX backfills_created ON backfills (tenant_id, created_at, id);

CREATE TABLE backfill_partitions (
  tenant_id     text COLLATE "C" NOT NULL,
  backfill_id   text COLLATE "C" NOT NULL,
  id            text COLLATE "C" NOT NULL,
  seq           bigint NOT NULL,
  scheduled_at  text COLLATE "C" NOT NULL,
  chunk         bigint NOT NULL,
  state         text COLLATE "C" NOT NULL,
  invocation_id text COLLATE "C",
  attempts      bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, backfill_id, id)
);
CREATE INDEX backfill_partitions_state ON backfill_partitions (tenant_id, backfill_id, state, chunk);

-- +goose Down
DROP TABLE backfill_partitions;
DROP TABLE backfills;
DROP TABLE schedule_runs;
DROP TABLE schedules;
DROP TABLE tenant_history;
DROP TABLE usage_hourly;
DROP TABLE event_consumptions;
DROP TABLE event_waits;
DROP TABLE events;
DROP TABLE response_cache;
DROP TABLE idempotency_keys;
DROP TRIGGER audit_events_append_only ON audit_events;
DROP FUNCTION audit_events_append_only();
DROP TABLE audit_events;
DROP TABLE invocation_events;
DROP TABLE invocations;
DROP TABLE entrypoints;
DROP TABLE tokens;
DROP TABLE tenants;
DROP FUNCTION lark_json_array(text);
DROP FUNCTION lark_json_field(text, text);
