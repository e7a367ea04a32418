package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

const workerCols = "worker_id, node, key_id, tenants, capacity, version, tasks_held, first_seen_at, last_seen_at"

// workerKey is a worker row's unique id: the worker id and the node, length-prefixed so that no two
// pairs share one.
func workerKey(workerID, node string) string {
	return fmt.Sprintf("%d:%s@%s", len(workerID), workerID, node)
}

func scanWorker(s Scanner) (store.Worker, error) {
	var w store.Worker
	var tenants, first, last string
	if err := s.Scan(&w.WorkerID, &w.Node, &w.KeyID, &tenants, &w.Capacity, &w.Version, &w.TasksHeld, &first, &last); err != nil {
		return w, err
	}
	if err := json.Unmarshal([]byte(tenants), &w.Tenants); err != nil {
		return w, fmt.Errorf("worker %s: tenants: %w", w.WorkerID, err)
	}
	var err error
	if w.FirstSeenAt, err = ParseTS(first); err != nil {
		return w, err
	}
	w.LastSeenAt, err = ParseTS(last)
	return w, err
}

// workerFields are the workers' list fields; status compares last_seen_at with onlineSince.
func workerFields(onlineSince time.Time) odata.Schema {
	return odata.Schema{
		"worker_id":     {Column: "worker_id", Type: odata.String, Filter: true, Sort: true},
		"node":          {Column: "node", Type: odata.String, Filter: true, Sort: true},
		"key_id":        {Column: "key_id", Type: odata.String, Filter: true, Sort: true},
		"first_seen_at": {Column: "first_seen_at", Type: odata.Time, Filter: true, Sort: true},
		"last_seen_at":  {Column: "last_seen_at", Type: odata.Time, Filter: true, Sort: true},
		"status": {Type: odata.Enum, Enum: []string{"online", "offline"}, Filter: true,
			Custom: func(op string, vals []any) (string, []any, error) {
				var terms []string
				var args []any
				for _, v := range vals {
					online := v == "online"
					if op == odata.OpNe {
						online = !online
					}
					if online {
						terms = append(terms, "last_seen_at >= ?")
					} else {
						terms = append(terms, "last_seen_at < ?")
					}
					args = append(args, TS(onlineSince))
				}
				return strings.Join(terms, " OR "), args, nil
			}},
	}
}

// ListWorkers implements store.Reader.
func (s *Reader) ListWorkers(ctx context.Context, q store.WorkerQuery) (store.Page[store.Worker], error) {
	scope, a := "", []any(nil)
	if q.TenantID != "" {
		scope, a = "(tenants = '[]' OR "+s.D.JSONArrayContains("tenants", "?")+")", []any{q.TenantID}
	}
	return ListPage(ctx, s.Q, ListSpec[store.Worker]{
		From: "workers", Cols: workerCols, Fields: workerFields(q.OnlineSince), Scope: scope, ScopeArgs: a,
		DefaultOrder: []odata.OrderItem{{Field: "worker_id"}, {Field: "node"}},
		Scan:         scanWorker,
	}, q.ListQuery)
}

// RecordWorkers implements store.Tx.
func (t *Tx) RecordWorkers(ws []store.Worker) error {
	for _, w := range ws {
		tenants := w.Tenants
		if tenants == nil {
			tenants = []string{}
		}
		tj, err := json.Marshal(tenants)
		if err != nil {
			return err
		}
		_, err = t.Q.ExecContext(bg, `INSERT INTO workers (id, `+workerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET key_id = excluded.key_id, tenants = excluded.tenants, capacity = excluded.capacity,
			version = excluded.version, tasks_held = excluded.tasks_held, last_seen_at = excluded.last_seen_at`,
			workerKey(w.WorkerID, w.Node), w.WorkerID, w.Node, w.KeyID, string(tj), w.Capacity, w.Version, w.TasksHeld,
			TS(w.FirstSeenAt), TS(w.LastSeenAt))
		if err != nil {
			return fmt.Errorf("worker %s: %w", w.WorkerID, err)
		}
	}
	return nil
}

// PurgeWorkers implements store.Tx.
func (t *Tx) PurgeWorkers(before time.Time, limit int) (int64, error) {
	res, err := t.Q.ExecContext(bg, `DELETE FROM workers WHERE id IN
		(SELECT id FROM workers WHERE last_seen_at < ? ORDER BY last_seen_at LIMIT ?)`, TS(before), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
