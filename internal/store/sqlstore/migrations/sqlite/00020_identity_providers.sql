-- +goose Up
-- The identity providers (OIDC issuers) whose JWTs authenticate callers beside Lark's own tokens
-- (docs/security.md, "Federated identity"). tenant_id is '' for a platform issuer; doc is the
-- provider as JSON (identity.Provider). An issuer is registered once, whoever registered it, so a
-- token's iss names exactly one provider.
CREATE TABLE identity_providers (
  id         TEXT PRIMARY KEY,
  tenant_id  TEXT NOT NULL,
  issuer     TEXT NOT NULL UNIQUE,
  doc        TEXT NOT NULL,
  created_at TEXT NOT NULL
) STRICT;
CREATE INDEX identity_providers_tenant_created ON identity_providers (tenant_id, created_at, id);

-- +goose Down
DROP TABLE identity_providers;
