-- +goose Up
-- Webhook triggers (002). doc is the resource as JSON; the columns are what lists find it by.
CREATE TABLE webhook_triggers (
  tenant_id     TEXT NOT NULL,
  id            TEXT NOT NULL,
  entrypoint_id TEXT NOT NULL,
  name          TEXT NOT NULL,
  status        TEXT NOT NULL,
  revision      INTEGER NOT NULL,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX webhook_triggers_created ON webhook_triggers (tenant_id, created_at, id);

-- A trigger's secrets, sealed by the keyring (envelope encryption; AAD = tenant, trigger,
-- generation). The current generation has no expiry; the one it replaced stays valid until
-- expires_at (the overlap of :regenerate-secret).
CREATE TABLE webhook_secrets (
  tenant_id  TEXT NOT NULL,
  trigger_id TEXT NOT NULL,
  generation INTEGER NOT NULL,
  sealed     BLOB NOT NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT,
  PRIMARY KEY (tenant_id, trigger_id, generation)
) STRICT, WITHOUT ROWID;

-- The last deliveries of each trigger (for debugging): never the body, never the secret.
CREATE TABLE webhook_deliveries (
  tenant_id     TEXT NOT NULL,
  trigger_id    TEXT NOT NULL,
  id            TEXT NOT NULL,
  received_at   TEXT NOT NULL,
  status_code   INTEGER NOT NULL,
  outcome       TEXT NOT NULL,
  doc           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, trigger_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX webhook_deliveries_received ON webhook_deliveries (tenant_id, trigger_id, received_at, id);

-- What the receiver remembers until expires_at: hashes of accepted signatures (a replay is
-- refused) and of idempotency keys (a redelivery answers with the first invocation).
CREATE TABLE webhook_seen (
  tenant_id     TEXT NOT NULL,
  trigger_id    TEXT NOT NULL,
  kind          TEXT NOT NULL,
  key           TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  delivery_id   TEXT NOT NULL,
  expires_at    TEXT NOT NULL,
  PRIMARY KEY (tenant_id, trigger_id, kind, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX webhook_seen_expiry ON webhook_seen (tenant_id, trigger_id, expires_at);

-- +goose Down
DROP TABLE webhook_seen;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_secrets;
DROP TABLE webhook_triggers;
