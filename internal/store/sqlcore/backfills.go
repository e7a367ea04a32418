package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/store"
)

// backfillCols are the columns scanBackfill reads.
const backfillCols = "revision, doc"

func scanBackfill(sc interface{ Scan(...any) error }) (schedule.Backfill, error) {
	var b schedule.Backfill
	var rev int64
	var doc string
	if err := sc.Scan(&rev, &doc); err != nil {
		return b, err
	}
	if err := json.Unmarshal([]byte(doc), &b); err != nil {
		return b, fmt.Errorf("backfill: %w", err)
	}
	b.Revision = rev
	return b, nil
}

// InsertBackfill implements store.Tx.
func (t *Tx) InsertBackfill(b *schedule.Backfill, parts []schedule.Partition) error {
	b.Revision = 1
	doc, err := json.Marshal(b)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO backfills (tenant_id, id, state, entrypoint_id, schedule_id, revision, created_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, b.TenantID, b.ID, string(b.State), b.EntrypointID, b.ScheduleID, b.Revision, TS(b.CreatedAt), string(doc))
	if dup {
		return fmt.Errorf("backfill %s: %w", b.ID, store.ErrConflict)
	}
	if err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := t.Q.ExecContext(bg, `INSERT INTO backfill_partitions (tenant_id, backfill_id, id, seq, scheduled_at, chunk, state)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, b.TenantID, b.ID, p.ID, p.Seq, TS(p.ScheduledAt), p.Chunk, string(p.State)); err != nil {
			return err
		}
	}
	return nil
}

// Backfill implements store.Tx.
func (t *Tx) Backfill(tenantID, id string) (schedule.Backfill, error) {
	b, err := scanBackfill(t.Q.QueryRowContext(bg, "SELECT "+backfillCols+" FROM backfills WHERE tenant_id = ? AND id = ?", tenantID, id))
	return b, NotFound(err, "backfill")
}

// UpdateBackfill implements store.Tx.
func (t *Tx) UpdateBackfill(b *schedule.Backfill) error {
	doc, err := json.Marshal(b)
	if err != nil {
		return err
	}
	res, err := t.Q.ExecContext(bg, `UPDATE backfills SET state = ?, revision = revision + 1, doc = ?
		WHERE tenant_id = ? AND id = ? AND revision = ?`, string(b.State), string(doc), b.TenantID, b.ID, b.Revision)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("backfill %s: %w", b.ID, store.ErrStale)
	}
	b.Revision++
	return nil
}

// SettleBackfill implements store.Tx.
func (t *Tx) SettleBackfill(tenantID, id string) (schedule.Progress, schedule.Chunks, error) {
	var p schedule.Progress
	var c schedule.Chunks
	_, err := t.Q.ExecContext(bg, `UPDATE backfill_partitions AS p
		SET state = CASE i.status WHEN 'succeeded' THEN 'completed' ELSE 'failed' END
		FROM invocations AS i
		WHERE p.tenant_id = ? AND p.backfill_id = ? AND p.state = 'running'
		  AND i.id = p.invocation_id AND i.tenant_id = p.tenant_id
		  AND i.status IN ('succeeded', 'failed', 'canceled', 'dead_lettered', 'compensated')`, tenantID, id)
	if err != nil {
		return p, c, err
	}
	rows, err := t.Q.QueryContext(bg, `SELECT state, count(*), count(DISTINCT chunk) FROM backfill_partitions
		WHERE tenant_id = ? AND backfill_id = ? GROUP BY state`, tenantID, id)
	if err != nil {
		return p, c, err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n, chunks int
		if err := rows.Scan(&st, &n, &chunks); err != nil {
			return p, c, err
		}
		p.Total += n
		switch schedule.PartitionState(st) {
		case schedule.PartitionPending:
			p.Pending = n
		case schedule.PartitionRunning:
			p.Running, c.InFlight = n, chunks
		case schedule.PartitionCompleted:
			p.Completed = n
		case schedule.PartitionFailed:
			p.Failed = n
		case schedule.PartitionSkipped:
			p.Skipped = n
		}
	}
	if err := rows.Err(); err != nil {
		return p, c, err
	}
	err = t.Q.QueryRowContext(bg, "SELECT count(*), "+t.D.CountIf("open = 0")+" FROM (SELECT "+t.D.CountIf("state IN ('pending', 'running')")+
		` AS open FROM backfill_partitions WHERE tenant_id = ? AND backfill_id = ? GROUP BY chunk) AS chunks`, tenantID, id).Scan(&c.Total, &c.Completed)
	return p, c, err
}

// StartPartitions implements store.Tx.
func (t *Tx) StartPartitions(tenantID, backfillID string, parts []schedule.Partition) (int, error) {
	n := 0
	for _, p := range parts {
		res, err := t.Q.ExecContext(bg, `UPDATE backfill_partitions SET state = 'running', invocation_id = ?, attempts = attempts + 1
			WHERE tenant_id = ? AND backfill_id = ? AND id = ? AND state = 'pending'`, p.InvocationID, tenantID, backfillID, p.ID)
		if err != nil {
			return n, err
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	return n, nil
}

// SetPartitions implements store.Tx.
func (t *Tx) SetPartitions(m store.PartitionMove) ([]string, error) {
	tenantID, backfillID, from, to := m.TenantID, m.BackfillID, m.From, m.To
	rows, err := t.Q.QueryContext(bg, `UPDATE backfill_partitions SET state = ? WHERE tenant_id = ? AND backfill_id = ? AND state = ?
		RETURNING coalesce(invocation_id, '')`, string(to), tenantID, backfillID, string(from))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		if id != "" && from == schedule.PartitionRunning {
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}

// Backfill implements store.Reader.
func (s *Reader) Backfill(ctx context.Context, tenantID, id string) (schedule.Backfill, error) {
	b, err := scanBackfill(s.Q.QueryRowContext(ctx, "SELECT "+backfillCols+" FROM backfills WHERE tenant_id = ? AND id = ?", tenantID, id))
	return b, NotFound(err, "backfill")
}

var backfillFields = odata.Schema{
	"state":         {Column: "state", Type: odata.String, Filter: true, Sort: true},
	"entrypoint_id": {Column: "entrypoint_id", Type: odata.String, Filter: true, Sort: true},
	"schedule_id":   {Column: "schedule_id", Type: odata.String, Filter: true, Sort: true},
	"created_at":    {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListBackfills implements store.Reader.
func (s *Reader) ListBackfills(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[schedule.Backfill], error) {
	return ListPage(ctx, s.Q, ListSpec[schedule.Backfill]{
		From: "backfills", Cols: backfillCols, Fields: backfillFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scan:         func(r Scanner) (schedule.Backfill, error) { return scanBackfill(r) },
	}, q)
}

// partitionCols are the columns scanPartition reads.
const partitionCols = "id, seq, scheduled_at, chunk, state, coalesce(invocation_id, ''), attempts"

func scanPartition(sc interface{ Scan(...any) error }) (schedule.Partition, error) {
	var p schedule.Partition
	var at, st string
	if err := sc.Scan(&p.ID, &p.Seq, &at, &p.Chunk, &st, &p.InvocationID, &p.Attempts); err != nil {
		return p, err
	}
	p.State = schedule.PartitionState(st)
	var err error
	p.ScheduledAt, err = ParseTS(at)
	return p, err
}

var partitionFields = odata.Schema{
	"status":       {Column: "state", Type: odata.String, Filter: true, Sort: true},
	"chunk":        {Column: "chunk", Type: odata.Int, Filter: true, Sort: true},
	"scheduled_at": {Column: "scheduled_at", Type: odata.Time, Filter: true, Sort: true},
}

// BackfillPartitions implements store.Reader.
func (s *Reader) BackfillPartitions(ctx context.Context, tenantID, backfillID string, q store.ListQuery) (store.Page[schedule.Partition], error) {
	return ListPage(ctx, s.Q, ListSpec[schedule.Partition]{
		From: "backfill_partitions", Cols: partitionCols, Fields: partitionFields,
		Scope: "tenant_id = ? AND backfill_id = ?", ScopeArgs: []any{tenantID, backfillID},
		DefaultOrder: []odata.OrderItem{{Field: "scheduled_at"}},
		Scan:         func(r Scanner) (schedule.Partition, error) { return scanPartition(r) },
	}, q)
}

// ActiveBackfills implements store.Reader.
func (s *Reader) ActiveBackfills(ctx context.Context, limit int) ([][2]string, error) {
	rows, err := s.Q.QueryContext(ctx, "SELECT tenant_id, id FROM backfills"+s.D.IndexedBy("backfills_active")+
		" WHERE state IN ('running', 'paused') LIMIT ?", limit)
	return ScanAll(rows, err, func(r *sql.Rows) ([2]string, error) {
		var k [2]string
		err := r.Scan(&k[0], &k[1])
		return k, err
	})
}

// PendingChunks implements store.Reader.
func (s *Reader) PendingChunks(ctx context.Context, tenantID, backfillID string, limit int) (map[int][]schedule.Partition, error) {
	rows, err := s.Q.QueryContext(ctx, "SELECT "+partitionCols+` FROM backfill_partitions
		WHERE tenant_id = ? AND backfill_id = ? AND state = 'pending' AND chunk IN (
		  SELECT DISTINCT chunk FROM backfill_partitions WHERE tenant_id = ? AND backfill_id = ? AND state = 'pending'
		  AND chunk NOT IN (SELECT chunk FROM backfill_partitions WHERE tenant_id = ? AND backfill_id = ? AND state = 'running')
		  ORDER BY chunk LIMIT ?)
		ORDER BY seq`, tenantID, backfillID, tenantID, backfillID, tenantID, backfillID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int][]schedule.Partition{}
	for rows.Next() {
		p, err := scanPartition(rows)
		if err != nil {
			return nil, err
		}
		out[p.Chunk] = append(out[p.Chunk], p)
	}
	return out, rows.Err()
}
