-- +goose Up
-- Retention (tenant retention.* and quotas.max_execution_history_mb), maintained by the retention
-- job only: nothing on the invocation hot path writes these columns.
--   history_seq          the invocation's last_seq when the job last measured it (NULL: not since it
--                        last finished)
--   history_bytes        its history size then: the record plus its event rows (see retention.go)
--   history_finished_at  its finished_at then, in the fixed-width time form (the purge order)
ALTER TABLE invocations ADD COLUMN history_seq INTEGER;
ALTER TABLE invocations ADD COLUMN history_bytes INTEGER;
ALTER TABLE invocations ADD COLUMN history_finished_at TEXT;

-- The job's to-do lists. Their conditions name only status and job-owned columns, never a column
-- an append writes (last_seq, updated_at, record): appends to an invocation never evaluate or touch
-- them; only a status change does (a few per invocation).
-- Finished and not measured since it last finished: an invocation enters when it finishes and leaves
-- when the job measures it, so the index holds the backlog of one interval.
CREATE INDEX invocations_unmeasured ON invocations (tenant_id)
  WHERE (status = 'succeeded' OR status = 'failed' OR status = 'canceled' OR status = 'compensated' OR status = 'dead_lettered')
    AND history_seq IS NULL;
-- Measured, then in flight again (a retry, a DLQ redrive, a compensation): the job clears its
-- history_seq so that it is measured again when it finishes (its last size stays in the total).
CREATE INDEX invocations_reopened ON invocations (tenant_id)
  WHERE (status = 'queued' OR status = 'running' OR status = 'suspended' OR status = 'compensating')
    AND history_seq IS NOT NULL;

-- Purge order: oldest finished first, per tenant. Only the job writes history_finished_at.
CREATE INDEX invocations_history_age ON invocations (tenant_id, history_finished_at)
  WHERE history_finished_at IS NOT NULL;

-- Per-tenant running total of history_bytes over the tenant's measured invocations, changed in the
-- same transaction as each measurement and each purge.
CREATE TABLE tenant_history (
  tenant_id TEXT PRIMARY KEY,
  bytes     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- A purged invocation's idempotency keys and response-cache entries go with it.
CREATE INDEX idempotency_keys_invocation ON idempotency_keys (invocation_id);
CREATE INDEX response_cache_invocation ON response_cache (invocation_id);

-- The audit log is append-only: no UPDATE, ever. Its only DELETE is the retention purge
-- (sqlstore PurgeAudit, rows older than the tenant's retention.audit_log_days).
-- +goose StatementBegin
CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
BEGIN
  SELECT RAISE(ABORT, 'audit_events is append-only');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER audit_events_append_only;
DROP INDEX response_cache_invocation;
DROP INDEX idempotency_keys_invocation;
DROP TABLE tenant_history;
DROP INDEX invocations_history_age;
DROP INDEX invocations_reopened;
DROP INDEX invocations_unmeasured;
ALTER TABLE invocations DROP COLUMN history_finished_at;
ALTER TABLE invocations DROP COLUMN history_bytes;
ALTER TABLE invocations DROP COLUMN history_seq;
