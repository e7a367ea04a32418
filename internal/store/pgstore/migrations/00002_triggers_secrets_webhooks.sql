-- +goose Up
-- Event types and triggers, tenant secrets and webhook triggers: the PostgreSQL equivalent of the
-- SQLite migrations 00011-00013 (internal/store/sqlstore/migrations/sqlite), with the conventions of
-- 00001_init.sql (times as fixed-width UTC text, text columns COLLATE "C", JSON documents as text,
-- booleans as 0/1). Sealed values (secrets, webhook secrets) are bytea: they are binary.

-- Registered event types (POST /event-types): scope is the tenant id, or '' for the platform's.
CREATE TABLE event_types (
  scope      text COLLATE "C" NOT NULL,
  id         text COLLATE "C" NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  doc        text NOT NULL,
  PRIMARY KEY (scope, id)
);

-- Event triggers. doc is the resource as JSON; the columns are what matching, the batch flusher and
-- the lists find it by. batch_due_at is when the oldest pending event of a batching trigger has
-- waited max_wait_ms (NULL: nothing pending).
CREATE TABLE triggers (
  tenant_id     text COLLATE "C" NOT NULL,
  id            text COLLATE "C" NOT NULL,
  event_type_id text COLLATE "C" NOT NULL,
  entrypoint_id text COLLATE "C" NOT NULL,
  status        text COLLATE "C" NOT NULL,
  batch_due_at  text COLLATE "C",
  revision      bigint NOT NULL,
  created_at    text COLLATE "C" NOT NULL,
  updated_at    text COLLATE "C" NOT NULL,
  doc           text NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
CREATE INDEX triggers_match ON triggers (tenant_id, event_type_id) WHERE status = 'active';
CREATE INDEX triggers_created ON triggers (tenant_id, created_at, id);
CREATE INDEX triggers_batch_due ON triggers (batch_due_at) WHERE batch_due_at IS NOT NULL;

-- The invocations triggers started, one row per invocation. The unique index on the first event
-- makes each event start at most once per trigger; a redrive (redrive 1) is outside it.
CREATE TABLE trigger_starts (
  tenant_id     text COLLATE "C" NOT NULL,
  invocation_id text COLLATE "C" NOT NULL,
  trigger_id    text COLLATE "C" NOT NULL,
  first_seq     bigint NOT NULL,
  received_at   text COLLATE "C" NOT NULL,
  started_at    text COLLATE "C" NOT NULL,
  ended_at      text COLLATE "C",
  redrive       integer NOT NULL,
  doc           text NOT NULL,
  PRIMARY KEY (tenant_id, invocation_id)
);
CREATE UNIQUE INDEX trigger_starts_event ON trigger_starts (tenant_id, trigger_id, first_seq) WHERE redrive = 0;
-- The retention purge's walk (SQLite finds these through the primary key's tenant prefix).
CREATE INDEX trigger_starts_ended ON trigger_starts (tenant_id, ended_at) WHERE ended_at IS NOT NULL;

-- Matching events waiting in a batching trigger's batch, in arrival order (the events' seq).
CREATE TABLE trigger_pending (
  tenant_id  text COLLATE "C" NOT NULL,
  trigger_id text COLLATE "C" NOT NULL,
  event_seq  bigint NOT NULL,
  PRIMARY KEY (tenant_id, trigger_id, event_seq)
);

-- Events whose invocation failed after its retries (the trigger's dead-letter queue).
CREATE TABLE trigger_dead_letters (
  tenant_id     text COLLATE "C" NOT NULL,
  trigger_id    text COLLATE "C" NOT NULL,
  id            text COLLATE "C" NOT NULL,
  invocation_id text COLLATE "C" NOT NULL,
  created_at    text COLLATE "C" NOT NULL,
  doc           text NOT NULL,
  PRIMARY KEY (tenant_id, trigger_id, id)
);
CREATE UNIQUE INDEX trigger_dead_letters_invocation ON trigger_dead_letters (tenant_id, invocation_id) WHERE invocation_id <> '';
CREATE INDEX trigger_dead_letters_created ON trigger_dead_letters (tenant_id, trigger_id, created_at, id);

-- A trigger's metrics, one row per hour: counters and a latency histogram (JSON array of counts
-- per bucket of trigger.LatencyBounds).
CREATE TABLE trigger_metrics (
  tenant_id     text COLLATE "C" NOT NULL,
  trigger_id    text COLLATE "C" NOT NULL,
  hour          text COLLATE "C" NOT NULL,
  received      bigint NOT NULL DEFAULT 0,
  filtered_out  bigint NOT NULL DEFAULT 0,
  triggered     bigint NOT NULL DEFAULT 0,
  succeeded     bigint NOT NULL DEFAULT 0,
  failed        bigint NOT NULL DEFAULT 0,
  dead_lettered bigint NOT NULL DEFAULT 0,
  latency       text NOT NULL DEFAULT '[]',
  PRIMARY KEY (tenant_id, trigger_id, hour)
);
-- The retention purge's walk by hour across a tenant's triggers.
CREATE INDEX trigger_metrics_hour ON trigger_metrics (tenant_id, hour);

-- Tenant secrets (docs/secrets.md): metadata in secrets, values in secret_versions, sealed by
-- internal/keyring. Only the latest version keeps its sealed value; key_id is the fingerprint of
-- the master key that wrapped it (never the key).
CREATE TABLE secrets (
  tenant_id     text COLLATE "C" NOT NULL,
  name          text COLLATE "C" NOT NULL,
  description   text NOT NULL,
  allowed_hosts text NOT NULL, -- JSON array of host patterns
  version       bigint NOT NULL,
  created_at    text COLLATE "C" NOT NULL,
  updated_at    text COLLATE "C" NOT NULL,
  last_used_at  text COLLATE "C",
  created_by    text COLLATE "C" NOT NULL,
  updated_by    text COLLATE "C" NOT NULL,
  id            text COLLATE "C" GENERATED ALWAYS AS (name) STORED, -- the lists' unique last sort key
  PRIMARY KEY (tenant_id, name)
);
CREATE INDEX secrets_created ON secrets (tenant_id, created_at, name);

CREATE TABLE secret_versions (
  tenant_id  text COLLATE "C" NOT NULL,
  name       text COLLATE "C" NOT NULL,
  version    bigint NOT NULL,
  sealed     bytea,                     -- NULL once superseded
  key_id     text COLLATE "C" NOT NULL, -- '' once superseded
  created_at text COLLATE "C" NOT NULL,
  created_by text COLLATE "C" NOT NULL,
  PRIMARY KEY (tenant_id, name, version)
);
CREATE INDEX secret_versions_key ON secret_versions (key_id, tenant_id, name, version) WHERE sealed IS NOT NULL;

-- Webhook triggers. doc is the resource as JSON; the columns are what lists find it by.
CREATE TABLE webhook_triggers (
  tenant_id     text COLLATE "C" NOT NULL,
  id            text COLLATE "C" NOT NULL,
  entrypoint_id text COLLATE "C" NOT NULL,
  name          text COLLATE "C" NOT NULL,
  status        text COLLATE "C" NOT NULL,
  revision      bigint NOT NULL,
  created_at    text COLLATE "C" NOT NULL,
  updated_at    text COLLATE "C" NOT NULL,
  doc           text NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
CREATE INDEX webhook_triggers_created ON webhook_triggers (tenant_id, created_at, id);

-- A trigger's secrets, sealed by the keyring (AAD = tenant, trigger, generation). The current
-- generation has no expiry; the one it replaced stays valid until expires_at.
CREATE TABLE webhook_secrets (
  tenant_id  text COLLATE "C" NOT NULL,
  trigger_id text COLLATE "C" NOT NULL,
  generation bigint NOT NULL,
  sealed     bytea NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  expires_at text COLLATE "C",
  PRIMARY KEY (tenant_id, trigger_id, generation)
);

-- The last deliveries of each trigger (for debugging): never the body, never the secret.
CREATE TABLE webhook_deliveries (
  tenant_id   text COLLATE "C" NOT NULL,
  trigger_id  text COLLATE "C" NOT NULL,
  id          text COLLATE "C" NOT NULL,
  received_at text COLLATE "C" NOT NULL,
  status_code bigint NOT NULL,
  outcome     text COLLATE "C" NOT NULL,
  doc         text NOT NULL,
  PRIMARY KEY (tenant_id, trigger_id, id)
);
CREATE INDEX webhook_deliveries_received ON webhook_deliveries (tenant_id, trigger_id, received_at, id);

-- What the receiver remembers until expires_at: hashes of accepted signatures (a replay is
-- refused) and of idempotency keys (a redelivery answers with the first invocation).
CREATE TABLE webhook_seen (
  tenant_id     text COLLATE "C" NOT NULL,
  trigger_id    text COLLATE "C" NOT NULL,
  kind          text COLLATE "C" NOT NULL,
  key           text COLLATE "C" NOT NULL,
  invocation_id text COLLATE "C" NOT NULL,
  delivery_id   text COLLATE "C" NOT NULL,
  expires_at    text COLLATE "C" NOT NULL,
  PRIMARY KEY (tenant_id, trigger_id, kind, key)
);
CREATE INDEX webhook_seen_expiry ON webhook_seen (tenant_id, trigger_id, expires_at);

-- +goose Down
DROP TABLE webhook_seen;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_secrets;
DROP TABLE webhook_triggers;
DROP TABLE secret_versions;
DROP TABLE secrets;
DROP TABLE trigger_metrics;
DROP TABLE trigger_dead_letters;
DROP TABLE trigger_pending;
DROP TABLE trigger_starts;
DROP TABLE triggers;
DROP TABLE event_types;
