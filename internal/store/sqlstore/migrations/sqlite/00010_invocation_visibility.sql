-- +goose Up
-- Who may see an invocation (invocation.Record.VisibleTo): the subject that started it and, for an
-- invocation of a user-owned entrypoint, that entrypoint's owner, recorded at creation. Existing
-- invocations take them from their record and their entrypoint version (the record is updated too,
-- so the Go check and the SQL scope agree).
ALTER TABLE invocations ADD COLUMN subject_id TEXT NOT NULL DEFAULT '';
ALTER TABLE invocations ADD COLUMN entrypoint_owner TEXT NOT NULL DEFAULT '';
-- (json_valid guards: a record SQLite cannot parse, e.g. one nested past its JSON depth limit before
-- inputs were bounded, must not fail the migration.)
UPDATE invocations SET subject_id = coalesce(json_extract(record, '$.subject_id'), '') WHERE json_valid(record);
UPDATE invocations SET entrypoint_owner = coalesce((SELECT e.owner_id FROM entrypoints e
  WHERE e.id = invocations.entrypoint_ref AND e.owner_type = 'user'), '');
UPDATE invocations SET record = json_set(record, '$.entrypoint_owner', entrypoint_owner)
  WHERE entrypoint_owner <> '' AND json_valid(record);

-- +goose Down
ALTER TABLE invocations DROP COLUMN entrypoint_owner;
ALTER TABLE invocations DROP COLUMN subject_id;
