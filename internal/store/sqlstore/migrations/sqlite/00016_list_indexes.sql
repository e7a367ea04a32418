-- +goose Up
-- Every documented $filter of the large lists has an index that starts with the list's scope and
-- the filtered column and then holds the list's default order, so that a selective filter reads
-- only the rows it returns and a dense one reads one page of the index (docs/api.md, "Which
-- filters are indexed"). Without them a filter such as status eq 'failed' walked the tenant's whole
-- (tenant_id, created_at) index: 4-8 CPU-seconds per call at 1,000,000 invocations.
-- The columns are ascending, like (tenant_id, created_at, id): walked backwards, an index gives
-- created_at desc (the default order of GET /invocations) and the planner sorts only the rows of
-- equal created_at by id; walked forwards, created_at asc exactly. An index in the default order's
-- directions (created_at DESC, id) made SQLite's planner walk the (tenant_id, created_at) index
-- for "$orderby=created_at asc" instead.
-- Each index costs every invocation's insert (and the status one each status change): no index
-- serves two fields together; "entrypoint_id eq X and status eq 'failed'" reads X's invocations
-- newest first and skips the others (measured on SQLite: with an index on both, the async
-- scenario's server CPU rose 17 %; with these four, by no more than the noise: docs/benchmarks.md).
CREATE INDEX invocations_tenant_status_created ON invocations (tenant_id, status, created_at, id);
CREATE INDEX invocations_tenant_entrypoint_created ON invocations (tenant_id, entrypoint_id, created_at, id);
CREATE INDEX invocations_tenant_mode_created ON invocations (tenant_id, mode, created_at, id);
CREATE INDEX invocations_tenant_correlation_created ON invocations (tenant_id, correlation_id, created_at, id);

-- Audit events (default order timestamp asc): one request's events, one resource's, one actor's,
-- one type's.
CREATE INDEX audit_events_tenant_correlation ON audit_events (tenant_id, correlation_id, at, id);
CREATE INDEX audit_events_tenant_resource ON audit_events (tenant_id, resource_type, resource_id, at, id);
CREATE INDEX audit_events_tenant_actor ON audit_events (tenant_id, actor_id, at, id);
CREATE INDEX audit_events_tenant_type ON audit_events (tenant_id, type, at, id);
-- The platform operator's view of every tenant's events, in order and by time range.
CREATE INDEX audit_events_at ON audit_events (at, id);

-- A schedule's history (default order scheduled_at desc, walked backwards) and its kind filter;
-- the unique index on scheduled_at leaves manual runs out, so it cannot serve the list.
CREATE INDEX schedule_runs_history ON schedule_runs (tenant_id, schedule_id, scheduled_at, id);
CREATE INDEX schedule_runs_kind ON schedule_runs (tenant_id, schedule_id, kind, scheduled_at, id);

-- A backfill's partitions (default order scheduled_at asc), all of them or those of one status.
CREATE INDEX backfill_partitions_scheduled ON backfill_partitions (tenant_id, backfill_id, scheduled_at, id);
CREATE INDEX backfill_partitions_state_scheduled ON backfill_partitions (tenant_id, backfill_id, state, scheduled_at, id);

-- A trigger's dead letters of one invocation, in the default order (the unique index on
-- (tenant_id, invocation_id) is partial, which a bound value cannot be proven to satisfy).
CREATE INDEX trigger_dead_letters_by_invocation ON trigger_dead_letters (tenant_id, trigger_id, invocation_id, created_at, id);

-- +goose Down
DROP INDEX trigger_dead_letters_by_invocation;
DROP INDEX backfill_partitions_state_scheduled;
DROP INDEX backfill_partitions_scheduled;
DROP INDEX schedule_runs_kind;
DROP INDEX schedule_runs_history;
DROP INDEX audit_events_at;
DROP INDEX audit_events_tenant_type;
DROP INDEX audit_events_tenant_actor;
DROP INDEX audit_events_tenant_resource;
DROP INDEX audit_events_tenant_correlation;
DROP INDEX invocations_tenant_correlation_created;
DROP INDEX invocations_tenant_mode_created;
DROP INDEX invocations_tenant_entrypoint_created;
DROP INDEX invocations_tenant_status_created;
