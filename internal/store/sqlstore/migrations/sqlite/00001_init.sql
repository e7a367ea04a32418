-- +goose Up
-- Times are UTC text in the fixed-width form 2006-01-02T15:04:05.000000Z, so text order is time order.
CREATE TABLE tenants (
  tenant_id  TEXT PRIMARY KEY,
  enabled    INTEGER NOT NULL,
  policy     TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE tokens (
  id          TEXT PRIMARY KEY,
  tenant_id   TEXT NOT NULL,
  subject_id  TEXT NOT NULL,
  roles       TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  hash        TEXT NOT NULL UNIQUE,
  created_at  TEXT NOT NULL,
  created_by  TEXT NOT NULL,
  expires_at  TEXT,
  revoked_at  TEXT
) STRICT;
CREATE INDEX tokens_tenant_created ON tokens (tenant_id, created_at, id);

CREATE TABLE entrypoints (
  id         TEXT PRIMARY KEY,
  tenant_id  TEXT NOT NULL,
  gts_id     TEXT NOT NULL,
  family     TEXT NOT NULL,
  major      INTEGER NOT NULL,
  minor      INTEGER NOT NULL,
  has_minor  INTEGER NOT NULL,
  kind       TEXT NOT NULL,
  owner_type TEXT NOT NULL,
  owner_id   TEXT NOT NULL,
  shared     INTEGER NOT NULL,
  status     TEXT NOT NULL,
  version    TEXT NOT NULL,
  title      TEXT NOT NULL,
  tags       TEXT NOT NULL,
  adapter    TEXT NOT NULL,
  definition TEXT NOT NULL,
  meta       TEXT NOT NULL,
  revision   INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (tenant_id, gts_id),
  UNIQUE (tenant_id, family, major, minor)
) STRICT;
CREATE INDEX entrypoints_gts ON entrypoints (gts_id);
CREATE INDEX entrypoints_family ON entrypoints (family, major, minor);
CREATE INDEX entrypoints_tenant_created ON entrypoints (tenant_id, created_at, id);
CREATE INDEX entrypoints_system ON entrypoints (owner_type) WHERE owner_type = 'system';

CREATE TABLE invocations (
  id             TEXT PRIMARY KEY,
  tenant_id      TEXT NOT NULL,
  entrypoint_ref TEXT NOT NULL,
  entrypoint_id  TEXT NOT NULL,
  status         TEXT NOT NULL,
  mode           TEXT NOT NULL,
  correlation_id TEXT NOT NULL,
  last_seq       INTEGER NOT NULL,
  record         TEXT NOT NULL,
  created_at     TEXT NOT NULL,
  updated_at     TEXT NOT NULL
) STRICT;
CREATE INDEX invocations_tenant_created ON invocations (tenant_id, created_at, id);
CREATE INDEX invocations_entrypoint_status ON invocations (entrypoint_ref, status);

CREATE TABLE invocation_events (
  invocation_id   TEXT NOT NULL REFERENCES invocations (id) ON DELETE CASCADE,
  seq             INTEGER NOT NULL,
  type            TEXT NOT NULL,
  data            TEXT,
  idempotency_key TEXT NOT NULL,
  engine_attempt  INTEGER NOT NULL,
  logical_attempt INTEGER NOT NULL,
  at              TEXT NOT NULL,
  PRIMARY KEY (invocation_id, seq),
  UNIQUE (invocation_id, idempotency_key)
) STRICT, WITHOUT ROWID;

CREATE TABLE audit_events (
  id             TEXT PRIMARY KEY,
  tenant_id      TEXT NOT NULL,
  type           TEXT NOT NULL,
  actor_id       TEXT NOT NULL,
  resource_type  TEXT NOT NULL,
  resource_id    TEXT NOT NULL,
  correlation_id TEXT NOT NULL,
  at             TEXT NOT NULL,
  details        TEXT
) STRICT;
CREATE INDEX audit_events_tenant_at ON audit_events (tenant_id, at, id);

-- +goose Down
DROP TABLE audit_events;
DROP TABLE invocation_events;
DROP TABLE invocations;
DROP TABLE entrypoints;
DROP TABLE tokens;
DROP TABLE tenants;
