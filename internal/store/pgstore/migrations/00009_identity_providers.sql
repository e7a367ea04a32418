-- +goose Up
-- The identity providers: the PostgreSQL equivalent of the SQLite migration
-- 00020_identity_providers (internal/store/sqlstore/migrations/sqlite), which explains the table.
CREATE TABLE identity_providers (
  id         text COLLATE "C" PRIMARY KEY,
  tenant_id  text COLLATE "C" NOT NULL,
  issuer     text COLLATE "C" NOT NULL UNIQUE,
  doc        text NOT NULL,
  created_at text COLLATE "C" NOT NULL
);
CREATE INDEX identity_providers_tenant_created ON identity_providers (tenant_id, created_at, id);

-- +goose Down
DROP TABLE identity_providers;
