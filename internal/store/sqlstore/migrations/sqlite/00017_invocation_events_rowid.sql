-- +goose Up
-- The event log becomes a rowid table. As a WITHOUT ROWID table its rows lived in the primary key's
-- b-tree, and SQLite reads a whole row to compare keys with it when the row overflows a page: an
-- insert next to a 2 MB result read all of it, several times, on the one writer (measured: about
-- 15 ms of the writer per 1.8 MB result). Now the keys are in an index of their own and the rows,
-- large or small, are reached by rowid.
CREATE TABLE invocation_events_rowid (
  invocation_id   TEXT NOT NULL REFERENCES invocations (id) ON DELETE CASCADE,
  seq             INTEGER NOT NULL,
  type            TEXT NOT NULL,
  data            TEXT,
  idempotency_key TEXT NOT NULL,
  engine_attempt  INTEGER NOT NULL,
  logical_attempt INTEGER NOT NULL,
  at              TEXT NOT NULL,
  PRIMARY KEY (invocation_id, seq),
  UNIQUE (invocation_id, idempotency_key)
) STRICT;
INSERT INTO invocation_events_rowid (invocation_id, seq, type, data, idempotency_key, engine_attempt, logical_attempt, at)
  SELECT invocation_id, seq, type, data, idempotency_key, engine_attempt, logical_attempt, at FROM invocation_events;
DROP TABLE invocation_events;
ALTER TABLE invocation_events_rowid RENAME TO invocation_events;

-- +goose Down
CREATE TABLE invocation_events_norowid (
  invocation_id   TEXT NOT NULL REFERENCES invocations (id) ON DELETE CASCADE,
  seq             INTEGER NOT NULL,
  type            TEXT NOT NULL,
  data            TEXT,
  idempotency_key TEXT NOT NULL,
  engine_attempt  INTEGER NOT NULL,
  logical_attempt INTEGER NOT NULL,
  at              TEXT NOT NULL,
  PRIMARY KEY (invocation_id, seq),
  UNIQUE (invocation_id, idempotency_key)
) STRICT, WITHOUT ROWID;
INSERT INTO invocation_events_norowid (invocation_id, seq, type, data, idempotency_key, engine_attempt, logical_attempt, at)
  SELECT invocation_id, seq, type, data, idempotency_key, engine_attempt, logical_attempt, at FROM invocation_events;
DROP TABLE invocation_events;
ALTER TABLE invocation_events_norowid RENAME TO invocation_events;
