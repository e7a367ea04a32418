-- +goose Up
-- Assets of DAG workflows (004 §14, §16; internal/asset). A materialization is one task attempt's
-- output of an asset for a partition ('' when unpartitioned), moving through the output commit
-- protocol's states (staged, committed, promoted, quarantined, rejected); its data is in the blob
-- store under output_uri. checks is the check results as JSON (NULL: none ran). decided_by,
-- decided_at and reason record an approval or a rejection. A rowid table: check results can be
-- large (see 00017).
CREATE TABLE materializations (
  tenant_id       TEXT NOT NULL,
  id              TEXT NOT NULL,
  asset_key       TEXT NOT NULL,
  partition_key   TEXT NOT NULL,
  run_id          TEXT NOT NULL,
  task_id         TEXT NOT NULL,
  attempt         INTEGER NOT NULL,
  state           TEXT NOT NULL,
  output_uri      TEXT NOT NULL,
  row_count       INTEGER NOT NULL,
  byte_size       INTEGER NOT NULL,
  schema_hash     TEXT NOT NULL,
  checks          TEXT,
  checks_passed   INTEGER NOT NULL,
  checks_failed   INTEGER NOT NULL,
  gating_decision TEXT NOT NULL,
  created_at      TEXT NOT NULL,
  updated_at      TEXT NOT NULL,
  promoted_at     TEXT,
  decided_by      TEXT NOT NULL,
  decided_at      TEXT,
  reason          TEXT NOT NULL,
  PRIMARY KEY (tenant_id, id)
) STRICT;
-- The list's default order (created_at desc, walked backwards) and its filters: one asset's, one
-- asset's partition, one state (the quarantined ones awaiting a decision), one run's.
CREATE INDEX materializations_created ON materializations (tenant_id, created_at, id);
CREATE INDEX materializations_asset ON materializations (tenant_id, asset_key, created_at, id);
CREATE INDEX materializations_partition ON materializations (tenant_id, asset_key, partition_key, created_at, id);
CREATE INDEX materializations_state ON materializations (tenant_id, state, created_at, id);
CREATE INDEX materializations_run ON materializations (tenant_id, run_id, created_at, id);

-- The latest promoted materialization of each (asset, partition): one row each, replaced by the
-- next promotion in the same transaction as the materialization's state.
CREATE TABLE asset_latest (
  tenant_id          TEXT NOT NULL,
  asset_key          TEXT NOT NULL,
  partition_key      TEXT NOT NULL,
  materialization_id TEXT NOT NULL,
  promoted_at        TEXT NOT NULL,
  PRIMARY KEY (tenant_id, asset_key, partition_key)
) STRICT, WITHOUT ROWID;

-- An asset's row (004's asset_states): its latest promotion of any partition and its health.
-- last_check_passed is 0/1, NULL before any check ran.
CREATE TABLE asset_states (
  tenant_id                 TEXT NOT NULL,
  asset_key                 TEXT NOT NULL,
  latest_materialization_id TEXT NOT NULL DEFAULT '',
  latest_at                 TEXT,
  latest_partition_key      TEXT NOT NULL DEFAULT '',
  consecutive_failures      INTEGER NOT NULL DEFAULT 0,
  last_failure_at           TEXT,
  last_success_at           TEXT,
  last_check_passed         INTEGER,
  last_gating_decision      TEXT NOT NULL DEFAULT '',
  updated_at                TEXT NOT NULL,
  id                        TEXT GENERATED ALWAYS AS (asset_key) VIRTUAL, -- the lists' unique last sort key
  PRIMARY KEY (tenant_id, asset_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX asset_states_updated ON asset_states (tenant_id, updated_at, asset_key);

-- +goose Down
DROP TABLE asset_states;
DROP TABLE asset_latest;
DROP TABLE materializations;
