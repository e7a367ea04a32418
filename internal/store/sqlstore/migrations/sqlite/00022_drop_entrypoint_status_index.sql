-- +goose Up
-- invocations_entrypoint_status (entrypoint_ref, status) served one count only, an entrypoint's
-- unfinished invocations when it is deleted, which invocations_tenant_status_ref (tenant_id,
-- status, entrypoint_ref) answers as well. Every invocation paid for it five times: an entry at
-- its creation, moved at its claim and at its end (docs/benchmarks.md, issue 36).
DROP INDEX invocations_entrypoint_status;

-- +goose Down
CREATE INDEX invocations_entrypoint_status ON invocations (entrypoint_ref, status);
