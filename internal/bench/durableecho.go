package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/larkrun/lark/internal/groupcommit"
)

// durableEchoSchema is the least a sync call must make durable by the architecture's rules: the
// invocation's row (its projection, here only its id, tenant, status and the record) and its log,
// one row per event, unique on (invocation_id, seq) and on (invocation_id, idempotency_key). No
// other index, column or table.
const durableEchoSchema = `
CREATE TABLE IF NOT EXISTS invocations (
  id         TEXT PRIMARY KEY,
  tenant_id  TEXT NOT NULL,
  status     TEXT NOT NULL,
  record     TEXT NOT NULL,
  created_at TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS invocation_events (
  invocation_id   TEXT NOT NULL,
  seq             INTEGER NOT NULL,
  type            TEXT NOT NULL,
  data            TEXT,
  idempotency_key TEXT NOT NULL,
  at              TEXT NOT NULL,
  PRIMARY KEY (invocation_id, seq),
  UNIQUE (invocation_id, idempotency_key)
) STRICT;`

// DurableEcho is the echo baseline with the one durable write a sync call needs: each request's
// invocation row and its three events (created, started, succeeded) written in one transaction of
// a group committer (the one Lark's SQLite store uses: concurrent requests share a commit) on
// SQLite in WAL mode with synchronous=FULL, answered once committed. It is what no implementation
// of a durable sync call on this store can do without; Lark ÷ DurableEcho is what Lark adds to it.
type DurableEcho struct {
	db  *sql.DB
	gc  *groupcommit.Committer
	ins [2]*sql.Stmt // the invocation's row, an event
}

// OpenDurableEcho creates (or opens) its database in dir.
func OpenDurableEcho(dir string) (*DurableEcho, error) {
	dsn := "file:" + filepath.Join(dir, "durable-echo.db") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(durableEchoSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("durable echo schema: %w", err)
	}
	e := &DurableEcho{db: db}
	for i, q := range []string{`INSERT INTO invocations (id, tenant_id, status, record, created_at) VALUES (?, ?, ?, ?, ?)`,
		`INSERT INTO invocation_events (invocation_id, seq, type, data, idempotency_key, at) VALUES (?, ?, ?, ?, ?, ?)`} {
		if e.ins[i], err = db.Prepare(q); err != nil {
			db.Close()
			return nil, err
		}
	}
	e.gc = groupcommit.New(db, groupcommit.Options{PrepareSavepoints: true, LazySavepoints: true})
	return e, nil
}

// Close stops the committer and closes the database.
func (e *DurableEcho) Close() error {
	e.gc.Close()
	return e.db.Close()
}

// Handler answers any POST as EchoHandler does, after writing the call durably.
func (e *DurableEcho) Handler() http.Handler { return echoWith(e.write) }

// echoRecord is the record each call's row holds: the answer's document.
var echoRecord = string(EchoDocument)

// write makes one call durable: its row and its three events, in the committer's next batch.
func (e *DurableEcho) write(ctx context.Context, params []byte) error {
	var raw [16]byte
	rand.Read(raw[:])
	id := "inv_" + hex.EncodeToString(raw[:])
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return e.gc.Do(groupcommit.Rerunnable(ctx), func(tx *sql.Tx) error {
		if _, err := tx.Stmt(e.ins[0]).Exec(id, "bench", "succeeded", echoRecord, now); err != nil {
			return err
		}
		ev := tx.Stmt(e.ins[1])
		for seq, typ := range []string{"created", "started", "succeeded"} {
			var data any = string(params)
			if typ == "started" {
				data = nil
			}
			if _, err := ev.Exec(id, seq+1, typ, data, id+"."+typ, now); err != nil {
				return err
			}
		}
		return nil
	})
}
