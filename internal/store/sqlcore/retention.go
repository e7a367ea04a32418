package sqlcore

// Retention: the reads and bounded deletes of the retention job (internal/retention).
//
// History size is measured by the job, never on the append path: an invocation that finishes enters
// the partial index invocations_unmeasured through the status write it makes anyway; the job
// measures it on a read connection (MeasureHistory), then stores the measurement (history_seq,
// history_bytes, history_finished_at) and moves the tenant's total in tenant_history, in one
// transaction (RecordHistory). A measured invocation that runs again (a retry, a compensation) enters
// invocations_reopened through its status write; ReopenHistory clears its history_seq, so it is
// measured again when it finishes. The partial indexes' conditions name only status and job-owned
// columns: an append (which writes last_seq, updated_at and record) never evaluates them. The
// price: an informational event appended to an invocation that already finished and was measured
// (a late result) is not counted.
//
// An invocation whose event log is larger than one batch cannot be deleted in one transaction (the
// cascade would delete every event row). It is first hidden: its tenant_id becomes
// PurgingPrefix+tenant, so every tenant-scoped read answers not found from that batch on, and its
// history leaves the tenant's total. Later batches delete its event rows and then the row.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// terminalStatuses are the statuses of a finished invocation, as an SQL list.
const terminalStatuses = "('succeeded', 'failed', 'canceled', 'compensated', 'dead_lettered')"

// The conditions of the partial indexes invocations_unmeasured and invocations_reopened, verbatim
// (a query uses a partial index when its WHERE contains the index's condition).
const (
	// unmeasured is the condition of invocations_unmeasured.
	unmeasured = `(status = 'succeeded' OR status = 'failed' OR status = 'canceled' OR status = 'compensated' OR status = 'dead_lettered')
    AND history_seq IS NULL`
	// Reopened is the condition of invocations_reopened, for the stores' ReopenHistory.
	Reopened = `(status = 'queued' OR status = 'running' OR status = 'suspended' OR status = 'compensating')
    AND history_seq IS NOT NULL`
)

// eventBytes is the measured size of an invocation_events row (see store.HistorySize), its data
// counted unpacked (Dialect.DocLen).
func eventBytes(d Dialect) string {
	return "octet_length(type) + coalesce(" + d.DocLen("data") + ", 0) + octet_length(idempotency_key) + octet_length(at)"
}

// errNoFinishedAt: a finished invocation's record has no readable finished_at.
var errNoFinishedAt = errors.New("no finished_at")

// AllTenants implements store.Reader.
func (s *Reader) AllTenants(ctx context.Context) ([]tenant.Policy, error) {
	rows, err := s.Q.QueryContext(ctx, "SELECT tenant_id, policy FROM tenants ORDER BY tenant_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []tenant.Policy
	var bad []error
	for rows.Next() {
		var id, doc string
		var p tenant.Policy
		if err := rows.Scan(&id, &doc); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(doc), &p); err != nil {
			bad = append(bad, &store.TenantError{TenantID: id, Err: fmt.Errorf("policy: %w", err)})
			continue
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(bad...)
}

// TenantHistoryBytes implements store.Reader.
func (s *Reader) TenantHistoryBytes(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.Q.QueryRowContext(ctx, "SELECT bytes FROM tenant_history WHERE tenant_id = ?", tenantID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// MeasureHistory implements store.Reader. The sums run on a read connection, outside the
// committer's transaction, so measuring a long event log never holds up the writes. The index hint
// (Dialect.IndexedBy): without statistics SQLite may prefer an index on (tenant_id, status, ...),
// which would walk every finished invocation of the tenant instead of the backlog.
func (s *Reader) MeasureHistory(ctx context.Context, tenantID string, limit int) ([]store.HistorySize, error) {
	rows, err := s.Q.QueryContext(ctx, `SELECT id, last_seq, `+s.D.DocLen("record")+`,
		`+s.D.JSONField("record", "finished_at")+`, updated_at
		FROM invocations`+s.D.IndexedBy("invocations_unmeasured")+`
		WHERE tenant_id = ? AND `+unmeasured+` LIMIT ?`, tenantID, limit)
	if err != nil {
		return nil, err
	}
	var out []store.HistorySize
	for rows.Next() {
		var h store.HistorySize
		var finished sql.NullString
		var updated string
		if err := rows.Scan(&h.InvocationID, &h.LastSeq, &h.Bytes, &finished, &updated); err != nil {
			rows.Close()
			return nil, err
		}
		// A terminal record always has finished_at; one the database cannot parse, or a finished_at that is
		// not a time, is measured as finished at its last update rather than failing the batch.
		perr := errNoFinishedAt
		if finished.Valid {
			h.FinishedAt, perr = time.Parse(time.RFC3339Nano, finished.String)
		}
		if perr != nil {
			h.FinishedAt, perr = ParseTS(updated)
		}
		if perr != nil {
			rows.Close()
			return nil, fmt.Errorf("invocation %s: finished_at: %w", h.InvocationID, perr)
		}
		out = append(out, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		var events int64
		err := s.Q.QueryRowContext(ctx, "SELECT coalesce("+s.D.SumInt(eventBytes(s.D))+", 0) FROM invocation_events WHERE invocation_id = ? AND seq <= ?",
			out[i].InvocationID, out[i].LastSeq).Scan(&events)
		if err != nil {
			return nil, err
		}
		out[i].Bytes += events
	}
	return out, nil
}

// addHistoryBytes moves the tenant's history total by delta.
func (t *Tx) addHistoryBytes(tenantID string, delta int64) error {
	if delta == 0 {
		return nil
	}
	_, err := t.Q.ExecContext(bg, `INSERT INTO tenant_history (tenant_id, bytes) VALUES (?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET bytes = tenant_history.bytes + excluded.bytes`, tenantID, delta)
	return err
}

// RecordHistory implements store.Tx.
func (t *Tx) RecordHistory(tenantID string, sizes []store.HistorySize) (int, error) {
	var delta int64
	n := 0
	for _, h := range sizes {
		var last, old int64
		err := t.Q.QueryRowContext(bg, "SELECT last_seq, coalesce(history_bytes, 0) FROM invocations WHERE id = ? AND tenant_id = ?",
			h.InvocationID, tenantID).Scan(&last, &old)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return n, err
		}
		if last != h.LastSeq {
			continue // it changed since it was measured: the next pass measures it again
		}
		if _, err := t.Q.ExecContext(bg, "UPDATE invocations SET history_seq = ?, history_bytes = ?, history_finished_at = ? WHERE id = ?",
			h.LastSeq, h.Bytes, TS(h.FinishedAt), h.InvocationID); err != nil {
			return n, err
		}
		delta += h.Bytes - old
		n++
	}
	return n, t.addHistoryBytes(tenantID, delta)
}

// PurgeHistory implements store.Tx. A batch finishes a hidden invocation of an earlier batch if
// there is one; otherwise it reads the tenant's total, lists the candidates and purges them within
// the batch's budget.
func (t *Tx) PurgeHistory(tenantID string, p store.HistoryPurge) (store.HistoryPurged, error) {
	var out store.HistoryPurged
	budget := int64(max(p.MaxRows, 1))
	// A hidden invocation of an earlier batch is finished first.
	var hidden string
	err := t.Q.QueryRowContext(bg, "SELECT id FROM invocations WHERE tenant_id = ? LIMIT 1", PurgingPrefix+tenantID).Scan(&hidden)
	switch {
	case err == nil:
		return t.continuePurge(hidden, budget)
	case !errors.Is(err, sql.ErrNoRows):
		return out, err
	}
	var total int64
	if err := t.Q.QueryRowContext(bg, "SELECT bytes FROM tenant_history WHERE tenant_id = ?", tenantID).Scan(&total); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return out, err
	}
	before := TS(p.FinishedBefore)
	if purgeOverCap(p, total) {
		before = "~" // after every timestamp: any age
	}
	cands, err := t.purgeCandidates(tenantID, before, budget)
	if err != nil {
		return out, err
	}
	out, err = t.purgeBatch(tenantID, p, cands, budget, total)
	if err != nil {
		return out, err
	}
	return out, t.addHistoryBytes(tenantID, -out.Bytes)
}

// purgeOverCap reports whether a tenant whose history totals total bytes is over the purge's size
// cap (never, without a cap).
func purgeOverCap(p store.HistoryPurge, total int64) bool {
	return p.CapBytes > 0 && total > p.CapBytes
}

// purgeCandidate is an invocation PurgeHistory may delete: the rows it takes (its row and its event
// rows), its measured history bytes and when it finished (stored timestamp text).
type purgeCandidate struct {
	id         string
	rows       int64
	bytes      int64
	finishedAt string
}

// purgeCandidates lists up to budget of the tenant's purge candidates that finished before before
// (stored timestamp text; "~" for any age), oldest first.
func (t *Tx) purgeCandidates(tenantID, before string, budget int64) ([]purgeCandidate, error) {
	// Candidates: measured finished invocations, oldest first; a finished child or compensation
	// handler whose workflow is still in flight is skipped (the workflow reads it). One that finished
	// again since it was measured waits for its new measurement.
	q := `SELECT c.id, c.last_seq, c.history_bytes, c.history_finished_at FROM invocations c` + t.D.IndexedBy("invocations_history_age") + `
		WHERE c.tenant_id = ? AND c.history_finished_at IS NOT NULL AND c.history_finished_at < ?
		AND c.status IN ` + terminalStatuses + ` AND c.history_seq IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM invocations w WHERE w.id IN (` + t.D.JSONField("c.record", "parent_id") + `, ` + t.D.JSONField("c.record", "compensation_for") + `)
			AND w.tenant_id = c.tenant_id AND w.status IN ` + InFlightStatuses + `)
		ORDER BY c.history_finished_at LIMIT ?`
	var cands []purgeCandidate
	rows, err := t.Q.QueryContext(bg, q, tenantID, before, budget)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var c purgeCandidate
		var last int64
		if err := rows.Scan(&c.id, &last, &c.bytes, &c.finishedAt); err != nil {
			rows.Close()
			return nil, err
		}
		c.rows = 1 + last // the row and its events (seqs 1..last_seq, without gaps)
		cands = append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return cands, nil
}

// purgeBatch deletes the candidates in order while they are older than the purge's cutoff or the
// tenant (whose history totals total bytes) is over its cap, within budget rows. A candidate larger
// than a whole batch, met first, is hidden and its newest events deleted. It does not move the
// tenant's total (PurgeHistory does, by the bytes purged).
func (t *Tx) purgeBatch(tenantID string, p store.HistoryPurge, cands []purgeCandidate, budget, total int64) (store.HistoryPurged, error) {
	var out store.HistoryPurged
	cutoff := TS(p.FinishedBefore)
	// The candidate list itself stops at the bound: if every candidate goes, there may be more.
	out.More = int64(len(cands)) == budget
	for _, c := range cands {
		if c.finishedAt >= cutoff && !purgeOverCap(p, total) {
			out.More = false // young enough, and the tenant is within its cap
			break
		}
		if out.Rows+c.rows > budget {
			out.More = true
			if out.Rows > 0 {
				break // the next batch starts with it
			}
			// Larger than a whole batch: hide it now, delete it over the next batches.
			if err := t.detach(c.id, tenantID, true); err != nil {
				return out, err
			}
			out.Invocations++
			out.Bytes += c.bytes
			n, err := t.deleteEventChunk(c.id, budget)
			out.Rows += n
			if err != nil {
				return out, err
			}
			break
		}
		if err := t.detach(c.id, tenantID, false); err != nil {
			return out, err
		}
		out.Invocations++
		out.Rows += c.rows
		out.Bytes += c.bytes
		total -= c.bytes
	}
	return out, nil
}

// detach removes what points at an invocation (event waits, idempotency keys, response-cache
// entries) and then deletes its event log and it, or, when hide is set, hides it for a
// multi-batch purge.
func (t *Tx) detach(id, tenantID string, hide bool) error {
	for _, q := range []string{
		"DELETE FROM event_waits WHERE invocation_id = ? AND tenant_id = ?",
		"DELETE FROM event_consumptions WHERE invocation_id = ? AND tenant_id = ?",
		"DELETE FROM idempotency_keys WHERE invocation_id = ? AND tenant_id = ?",
		"DELETE FROM response_cache WHERE invocation_id = ? AND tenant_id = ?",
	} {
		if _, err := t.Q.ExecContext(bg, q, id, tenantID); err != nil {
			return err
		}
	}
	if hide {
		_, err := t.Q.ExecContext(bg, `UPDATE invocations SET tenant_id = ?, available_at = NULL, lease_owner = NULL,
			lease_expires_at = NULL WHERE id = ? AND tenant_id = ?`, PurgingPrefix+tenantID, id, tenantID)
		return err
	}
	// The events first: on PostgreSQL no foreign key cascades (migration 00004).
	if _, err := t.Q.ExecContext(bg, "DELETE FROM invocation_events WHERE invocation_id = ?", id); err != nil {
		return err
	}
	_, err := t.Q.ExecContext(bg, "DELETE FROM invocations WHERE id = ? AND tenant_id = ?", id, tenantID)
	return err
}

// deleteEventChunk deletes up to limit of an invocation's newest event rows.
func (t *Tx) deleteEventChunk(id string, limit int64) (int64, error) {
	res, err := t.Q.ExecContext(bg, `DELETE FROM invocation_events WHERE invocation_id = ? AND seq IN
		(SELECT seq FROM invocation_events WHERE invocation_id = ? ORDER BY seq DESC LIMIT ?)`, id, id, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// continuePurge deletes the next chunk of a hidden invocation's events, and the invocation once none
// are left.
func (t *Tx) continuePurge(id string, budget int64) (store.HistoryPurged, error) {
	out := store.HistoryPurged{More: true}
	n, err := t.deleteEventChunk(id, budget)
	out.Rows = n
	if err != nil || n == budget {
		return out, err
	}
	if _, err := t.Q.ExecContext(bg, "DELETE FROM invocations WHERE id = ?", id); err != nil {
		return out, err
	}
	out.Rows++
	return out, nil
}

// PurgeEvents implements store.Tx.
func (t *Tx) PurgeEvents(tenantID string, before time.Time, limit int) (int64, error) {
	cutoff := TS(before)
	var since sql.NullString
	if err := t.Q.QueryRowContext(bg, "SELECT min(since) FROM event_waits WHERE tenant_id = ?", tenantID).Scan(&since); err != nil {
		return 0, err
	}
	if since.Valid && since.String < cutoff {
		cutoff = since.String // a waiting workflow may still read events received since then
	}
	res, err := t.Q.ExecContext(bg, `DELETE FROM events WHERE seq IN
		(SELECT seq FROM events WHERE tenant_id = ? AND received_at < ? ORDER BY received_at LIMIT ?)`, tenantID, cutoff, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// PurgeAudit implements store.Tx.
func (t *Tx) PurgeAudit(tenantID string, before time.Time, limit int) (int64, error) {
	res, err := t.Q.ExecContext(bg, `DELETE FROM audit_events WHERE id IN
		(SELECT id FROM audit_events WHERE tenant_id = ? AND at < ? ORDER BY at LIMIT ?)`, tenantID, TS(before), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
