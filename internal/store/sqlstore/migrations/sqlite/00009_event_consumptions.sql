-- +goose Up
-- Which published event satisfied which workflow's r_wait_event_v1 (a projection of the
-- journal_resolved events that carry event_seq): a wait takes the earliest matching event its
-- invocation has not consumed yet, so one event satisfies at most one wait of an invocation.
CREATE TABLE event_consumptions (
  invocation_id TEXT NOT NULL,
  event_seq     INTEGER NOT NULL,
  tenant_id     TEXT NOT NULL,
  PRIMARY KEY (invocation_id, event_seq)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE event_consumptions;
