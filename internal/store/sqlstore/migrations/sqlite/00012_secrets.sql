-- +goose Up
-- Tenant secrets (docs/secrets.md). A secret's metadata is one row of secrets; its values are rows
-- of secret_versions, sealed by internal/keyring (envelope encryption under the master key, bound
-- to tenant, name and version as additional authenticated data). Only the latest version keeps its
-- sealed value: a superseded version keeps its metadata (for audit) and its value is erased.
-- key_id is the fingerprint of the master key that wrapped the value (never the key): the start-up
-- rotation finds the values to rewrap through it.
CREATE TABLE secrets (
  tenant_id     TEXT NOT NULL,
  name          TEXT NOT NULL,
  description   TEXT NOT NULL,
  allowed_hosts TEXT NOT NULL, -- JSON array of host patterns
  version       INTEGER NOT NULL,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  last_used_at  TEXT,
  created_by    TEXT NOT NULL,
  updated_by    TEXT NOT NULL,
  id            TEXT GENERATED ALWAYS AS (name) VIRTUAL, -- the lists' unique last sort key
  PRIMARY KEY (tenant_id, name)
) STRICT, WITHOUT ROWID;
CREATE INDEX secrets_created ON secrets (tenant_id, created_at, name);

CREATE TABLE secret_versions (
  tenant_id  TEXT NOT NULL,
  name       TEXT NOT NULL,
  version    INTEGER NOT NULL,
  sealed     BLOB,          -- NULL once superseded
  key_id     TEXT NOT NULL, -- '' once superseded
  created_at TEXT NOT NULL,
  created_by TEXT NOT NULL,
  PRIMARY KEY (tenant_id, name, version)
) STRICT, WITHOUT ROWID;
CREATE INDEX secret_versions_key ON secret_versions (key_id, tenant_id, name, version) WHERE sealed IS NOT NULL;

-- +goose Down
DROP TABLE secret_versions;
DROP TABLE secrets;
