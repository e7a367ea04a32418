-- +goose Up
-- Fair dispatch (004 §5): the dispatcher walks the tenants that have due work and, within a tenant,
-- the entrypoint versions that have due work, instead of taking the oldest rows of the whole table.
-- Both walks are index skip-scans: min(tenant_id) > previous, min(available_at) per tenant, and the
-- same per (tenant, entrypoint version); their cost follows the number of queues, not queued rows.
CREATE INDEX invocations_queue_tenant ON invocations (tenant_id, available_at) WHERE available_at IS NOT NULL;
CREATE INDEX invocations_queue_entrypoint ON invocations (tenant_id, entrypoint_ref, available_at) WHERE available_at IS NOT NULL;
-- Concurrency limits at claim time count a tenant's running invocations per entrypoint version.
CREATE INDEX invocations_tenant_status_ref ON invocations (tenant_id, status, entrypoint_ref);
DROP INDEX invocations_tenant_inflight;

-- +goose Down
CREATE INDEX invocations_tenant_inflight ON invocations (tenant_id, status);
DROP INDEX invocations_tenant_status_ref;
DROP INDEX invocations_queue_entrypoint;
DROP INDEX invocations_queue_tenant;
