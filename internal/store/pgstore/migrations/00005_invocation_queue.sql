-- +goose Up
-- The queue moves out of invocations into a narrow table of what is queued (docs/benchmarks.md,
-- PostgreSQL: "The claims' cost grows with the run"). A claimed invocation used to leave its entry
-- in the partial queue indexes of invocations until VACUUM, and every claim query stepped over all
-- of them (a FIFO queue's dead entries are the ones in front); invocations is too large to be
-- vacuumed every few seconds. invocation_queue holds one row per invocation with available_at set,
-- kept by a trigger in the transaction that sets or clears it, and the store vacuums it every few
-- seconds (cheap: it holds only what is queued). Claims read it and lock the invocation's row, as
-- before.
-- No primary key: a row is found by all four columns (invocation_queue_entrypoint), which the
-- trigger knows from the invocation's old row, and the trigger alone writes the table.
CREATE TABLE invocation_queue (
  id             text COLLATE "C" NOT NULL,
  tenant_id      text COLLATE "C" NOT NULL,
  entrypoint_ref text COLLATE "C" NOT NULL,
  available_at   text COLLATE "C" NOT NULL
);
CREATE INDEX invocation_queue_entrypoint ON invocation_queue (tenant_id, entrypoint_ref, available_at, id);
CREATE INDEX invocation_queue_tenant ON invocation_queue (tenant_id, available_at);
CREATE INDEX invocation_queue_due ON invocation_queue (available_at);

-- One trigger per kind of write, each with a WHEN condition so that the writes that leave the queue
-- alone (most updates: an outcome, a journal entry) do not call the function at all.
-- +goose StatementBegin
CREATE FUNCTION lark_invocation_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.available_at IS NOT NULL THEN
    DELETE FROM invocation_queue WHERE tenant_id = OLD.tenant_id AND entrypoint_ref = OLD.entrypoint_ref
      AND available_at = OLD.available_at AND id = OLD.id;
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.available_at IS NOT NULL THEN
    INSERT INTO invocation_queue (id, tenant_id, entrypoint_ref, available_at)
      VALUES (NEW.id, NEW.tenant_id, NEW.entrypoint_ref, NEW.available_at);
  END IF;
  RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER invocations_queue_insert AFTER INSERT ON invocations
  FOR EACH ROW WHEN (NEW.available_at IS NOT NULL) EXECUTE FUNCTION lark_invocation_queue();
CREATE TRIGGER invocations_queue_update AFTER UPDATE OF available_at, tenant_id, entrypoint_ref ON invocations
  FOR EACH ROW WHEN ((OLD.available_at, OLD.tenant_id, OLD.entrypoint_ref) IS DISTINCT FROM (NEW.available_at, NEW.tenant_id, NEW.entrypoint_ref))
  EXECUTE FUNCTION lark_invocation_queue();
CREATE TRIGGER invocations_queue_delete AFTER DELETE ON invocations
  FOR EACH ROW WHEN (OLD.available_at IS NOT NULL) EXECUTE FUNCTION lark_invocation_queue();

INSERT INTO invocation_queue (id, tenant_id, entrypoint_ref, available_at)
  SELECT id, tenant_id, entrypoint_ref, available_at FROM invocations WHERE available_at IS NOT NULL;

DROP INDEX invocations_runnable;
DROP INDEX invocations_queue_tenant;
DROP INDEX invocations_queue_entrypoint;

-- +goose Down
CREATE INDEX invocations_runnable ON invocations (available_at) WHERE available_at IS NOT NULL;
CREATE INDEX invocations_queue_tenant ON invocations (tenant_id, available_at) WHERE available_at IS NOT NULL;
CREATE INDEX invocations_queue_entrypoint ON invocations (tenant_id, entrypoint_ref, available_at) WHERE available_at IS NOT NULL;
DROP TRIGGER invocations_queue_insert ON invocations;
DROP TRIGGER invocations_queue_update ON invocations;
DROP TRIGGER invocations_queue_delete ON invocations;
DROP FUNCTION lark_invocation_queue();
DROP TABLE invocation_queue;
