-- +goose Up
-- The event log's rows are no longer checked against invocations by a foreign key: the check cost
-- each appended event an index probe of invocations and a row lock (docs/benchmarks.md,
-- PostgreSQL). Every writer appends an invocation's events in the transaction that inserts or
-- locks its row, and retention deletes the events before the invocation (sqlcore detach and
-- continuePurge), so the log cannot point at a missing invocation.
ALTER TABLE invocation_events DROP CONSTRAINT invocation_events_invocation_id_fkey;

-- +goose Down
DELETE FROM invocation_events e WHERE NOT EXISTS (SELECT 1 FROM invocations i WHERE i.id = e.invocation_id);
ALTER TABLE invocation_events ADD CONSTRAINT invocation_events_invocation_id_fkey
  FOREIGN KEY (invocation_id) REFERENCES invocations (id) ON DELETE CASCADE;
