-- +goose Up
-- Assets of DAG workflows: the PostgreSQL equivalent of the SQLite migration 00018_assets
-- (internal/store/sqlstore/migrations/sqlite), which explains each table, with the conventions of
-- 00001_init.sql (times as fixed-width UTC text, text columns COLLATE "C", JSON documents as text,
-- booleans as 0/1).
CREATE TABLE materializations (
  tenant_id       text COLLATE "C" NOT NULL,
  id              text COLLATE "C" NOT NULL,
  asset_key       text COLLATE "C" NOT NULL,
  partition_key   text COLLATE "C" NOT NULL,
  run_id          text COLLATE "C" NOT NULL,
  task_id         text COLLATE "C" NOT NULL,
  attempt         integer NOT NULL,
  state           text COLLATE "C" NOT NULL,
  output_uri      text COLLATE "C" NOT NULL,
  row_count       bigint NOT NULL,
  byte_size       bigint NOT NULL,
  schema_hash     text COLLATE "C" NOT NULL,
  checks          text,
  checks_passed   integer NOT NULL,
  checks_failed   integer NOT NULL,
  gating_decision text COLLATE "C" NOT NULL,
  created_at      text COLLATE "C" NOT NULL,
  updated_at      text COLLATE "C" NOT NULL,
  promoted_at     text COLLATE "C",
  decided_by      text COLLATE "C" NOT NULL,
  decided_at      text COLLATE "C",
  reason          text NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
CREATE INDEX materializations_created ON materializations (tenant_id, created_at, id);
CREATE INDEX materializations_asset ON materializations (tenant_id, asset_key, created_at, id);
CREATE INDEX materializations_partition ON materializations (tenant_id, asset_key, partition_key, created_at, id);
CREATE INDEX materializations_state ON materializations (tenant_id, state, created_at, id);
CREATE INDEX materializations_run ON materializations (tenant_id, run_id, created_at, id);

CREATE TABLE asset_latest (
  tenant_id          text COLLATE "C" NOT NULL,
  asset_key          text COLLATE "C" NOT NULL,
  partition_key      text COLLATE "C" NOT NULL,
  materialization_id text COLLATE "C" NOT NULL,
  promoted_at        text COLLATE "C" NOT NULL,
  PRIMARY KEY (tenant_id, asset_key, partition_key)
);

CREATE TABLE asset_states (
  tenant_id                 text COLLATE "C" NOT NULL,
  asset_key                 text COLLATE "C" NOT NULL,
  latest_materialization_id text COLLATE "C" NOT NULL DEFAULT '',
  latest_at                 text COLLATE "C",
  latest_partition_key      text COLLATE "C" NOT NULL DEFAULT '',
  consecutive_failures      integer NOT NULL DEFAULT 0,
  last_failure_at           text COLLATE "C",
  last_success_at           text COLLATE "C",
  last_check_passed         integer,
  last_gating_decision      text COLLATE "C" NOT NULL DEFAULT '',
  updated_at                text COLLATE "C" NOT NULL,
  id                        text COLLATE "C" GENERATED ALWAYS AS (asset_key) STORED, -- the lists' unique last sort key
  PRIMARY KEY (tenant_id, asset_key)
);
CREATE INDEX asset_states_updated ON asset_states (tenant_id, updated_at, asset_key);

-- +goose Down
DROP TABLE asset_states;
DROP TABLE asset_latest;
DROP TABLE materializations;
