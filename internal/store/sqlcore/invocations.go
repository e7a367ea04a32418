package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// Invocation implements store.Reader.
func (s *Reader) Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error) {
	return readRecord(ctx, s.Q, tenantID, id)
}

func readRecord(ctx context.Context, q Querier, tenantID, id string) (invocation.Record, error) {
	var doc, updated string
	var last int64
	err := q.QueryRowContext(ctx, "SELECT record, last_seq, updated_at FROM invocations WHERE id = ? AND tenant_id = ?", id, tenantID).
		Scan(&doc, &last, &updated)
	if err != nil {
		return invocation.Record{}, NotFound(err, "invocation")
	}
	return DecodeRecord(doc, last, updated)
}

// storedTime is t as the store keeps it: UTC, to the microsecond (the columns' text format). The
// projection's updated_at is an event's at, so both are cut the same way before they are applied.
func storedTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Events implements store.Reader. With q.MaxBytes, the log is read in chunks sized as ListPage's
// are, so that a driver that reads a statement to its end on close reads about one event past the
// budget, not the whole limit.
func (s *Reader) Events(ctx context.Context, q store.EventLogQuery) ([]invocation.Event, error) {
	rec, err := readRecord(ctx, s.Q, q.TenantID, q.InvocationID)
	if err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	lr := logReader{id: q.InvocationID, budget: q.MaxBytes}
	for after := q.AfterSeq; ; after = lr.out[len(lr.out)-1].Seq {
		n := lr.chunk(limit)
		got, err := lr.read(ctx, s.Q, after, n)
		if err != nil {
			return nil, err
		}
		if lr.full || got < n || len(lr.out) >= limit {
			break
		}
	}
	if lr.budget > 0 {
		rowBytes.note(eventsTable, lr.used, len(lr.out))
	}
	out := lr.out
	if missing := invocation.CheckGaps(q.AfterSeq, out); missing != 0 {
		return nil, &store.GapError{InvocationID: q.InvocationID, Missing: missing}
	}
	// A short page must reach the projection's high-water mark: a lost tail is a gap too. The record
	// was read first, so concurrent appends can only put the log ahead of it, never behind.
	last := q.AfterSeq
	if n := len(out); n > 0 {
		last = out[n-1].Seq
	}
	if !lr.full && len(out) < limit && last < rec.LastSeq {
		return nil, &store.GapError{InvocationID: q.InvocationID, Missing: last + 1}
	}
	return out, nil
}

// eventsTable names the event log in rowBytes.
const eventsTable = "invocation_events"

// logReader reads an invocation's events, over one statement or several, within a byte budget of
// their data (0: none) that the first event may exceed alone.
type logReader struct {
	id     string
	budget int
	out    []invocation.Event
	used   int  // the data bytes of out
	full   bool // the budget ended the read: the next event starts the next page
}

// chunk is how many events the next statement asks for (see pageReader.chunk).
func (lr *logReader) chunk(limit int) int {
	rest := limit - len(lr.out)
	avg := rowBytes.get(eventsTable)
	if len(lr.out) > 0 {
		avg = lr.used / len(lr.out)
	}
	if lr.budget <= 0 || avg <= 0 {
		return rest
	}
	return min(rest, max(2, (lr.budget-lr.used)/avg+2))
}

// read appends up to n events after seq after; got is how many rows the statement returned.
func (lr *logReader) read(ctx context.Context, q Querier, after int64, n int) (got int, err error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, type, data, idempotency_key, engine_attempt, logical_attempt, at
		FROM invocation_events WHERE invocation_id = ? AND seq > ? ORDER BY seq LIMIT ?`, lr.id, after, n)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		got++
		e := invocation.Event{InvocationID: lr.id}
		var data sql.NullString
		var at string
		if err := rows.Scan(&e.Seq, &e.Type, &data, &e.IdempotencyKey, &e.EngineAttempt, &e.LogicalAttempt, &at); err != nil {
			return got, err
		}
		if data.String, err = unpackString(data.String); err != nil {
			return got, err
		}
		if size := len(data.String); lr.budget > 0 && len(lr.out) > 0 && lr.used+size > lr.budget {
			lr.full = true
			return got, nil
		}
		lr.used += len(data.String)
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		if e.At, err = ParseTS(at); err != nil {
			return got, err
		}
		lr.out = append(lr.out, e)
	}
	return got, rows.Err()
}

// StatusAt implements store.Reader.
func (s *Reader) StatusAt(ctx context.Context, tenantID, invocationID string, seq int64) (invocation.Status, error) {
	if _, err := readRecord(ctx, s.Q, tenantID, invocationID); err != nil {
		return "", err
	}
	types := invocation.StatusEventTypes()
	args := []any{invocationID, seq}
	for _, t := range types {
		args = append(args, string(t))
	}
	var typ string
	err := s.Q.QueryRowContext(ctx, `SELECT type FROM invocation_events WHERE invocation_id = ? AND seq <= ?
		AND type IN (?`+strings.Repeat(", ?", len(types)-1)+`) ORDER BY seq DESC LIMIT 1`, args...).Scan(&typ)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	st, _ := invocation.StatusAfter(invocation.EventType(typ))
	return st, nil
}

// precondition is what an optimistic Append (Tx.Optimistic) assumed of the projection it did not
// read: the projection's update applies only where it holds.
type precondition struct {
	lastSeq int64
	owner   string // the lease the append requires; "" for none
}

// where is pre's SQL condition, to follow "WHERE id = ?", and its arguments.
func (pre *precondition) where() (string, []any) {
	if pre == nil {
		return "", nil
	}
	if pre.owner == "" {
		return " AND last_seq = ?", []any{pre.lastSeq}
	}
	return " AND last_seq = ? AND lease_owner = ?", []any{pre.lastSeq, pre.owner}
}

// execUpdate runs a projection UPDATE whose WHERE ends in "id = ?", with pre's condition appended
// and expected to hold (ExpectRows): when it did not, the write is a conflict, and a pipelined
// transaction that went on without waiting for it is replayed.
func (t *Tx) execUpdate(query string, args []any, pre *precondition) error {
	if pre == nil {
		_, err := t.Q.ExecContext(bg, query, args...)
		return err
	}
	cond, more := pre.where()
	res, err := t.Q.ExecContext(expectOne, query+cond, append(args, more...)...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(err, fmt.Errorf("invocation %s: not at last_seq %d or lease lost: %w", args[len(args)-1], pre.lastSeq, store.ErrConflict))
	}
	return nil
}

// checkPrecondition checks pre with a read, for an optimistic append that wrote nothing.
func (t *Tx) checkPrecondition(invocationID, tenantID string, pre *precondition) error {
	var last int64
	var owner sql.NullString
	err := t.Q.QueryRowContext(bg, "SELECT last_seq, lease_owner FROM invocations WHERE id = ? AND tenant_id = ?"+t.D.ForUpdate(), invocationID, tenantID).Scan(&last, &owner)
	if err != nil {
		return NotFound(err, "invocation")
	}
	if pre.owner != "" && owner.String != pre.owner {
		return fmt.Errorf("invocation %s: %w", invocationID, store.ErrLeaseLost)
	}
	if last != pre.lastSeq {
		return fmt.Errorf("invocation %s: last_seq %d, not the expected %d: %w", invocationID, last, pre.lastSeq, store.ErrConflict)
	}
	return nil
}

func (t *Tx) writeRecord(r invocation.Record, insert bool, sched *store.Scheduling, pre *precondition) error {
	doc, err := invocation.EncodeRecord(r)
	if err != nil {
		return err
	}
	if insert {
		var s store.Scheduling
		if sched != nil {
			s = *sched
		}
		dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO invocations (id, tenant_id, entrypoint_ref, entrypoint_id, status, mode,
			correlation_id, last_seq, record, created_at, updated_at, available_at, lease_owner, lease_expires_at,
			subject_id, entrypoint_owner)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.TenantID, r.EntrypointRef, r.EntrypointID, string(r.Status), string(r.Mode), r.CorrelationID,
			r.LastSeq, t.D.Pack(doc), TS(r.CreatedAt), TS(r.UpdatedAt), TSPtr(s.AvailableAt), nullable(s.LeaseOwner), TSPtr(s.LeaseExpiresAt),
			r.SubjectID, r.EntrypointOwner)
		if dup {
			return fmt.Errorf("invocation %s: %w", r.ID, store.ErrConflict)
		}
		return err
	}
	if sched != nil {
		return t.execUpdate(`UPDATE invocations SET status = ?, last_seq = ?, record = ?, updated_at = ?,
			available_at = ?, lease_owner = ?, lease_expires_at = ? WHERE id = ?`,
			[]any{string(r.Status), r.LastSeq, t.D.Pack(doc), TS(r.UpdatedAt), TSPtr(sched.AvailableAt), nullable(sched.LeaseOwner),
				TSPtr(sched.LeaseExpiresAt), r.ID}, pre)
	}
	return t.execUpdate(`UPDATE invocations SET status = ?, last_seq = ?, record = ?, updated_at = ? WHERE id = ?`,
		[]any{string(r.Status), r.LastSeq, t.D.Pack(doc), TS(r.UpdatedAt), r.ID}, pre)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// StartInvocation implements store.Tx.
func (t *Tx) StartInvocation(events []invocation.Event, sched store.Scheduling) (invocation.Record, error) {
	if len(events) == 0 || events[0].Type != invocation.EventCreated {
		return invocation.Record{}, fmt.Errorf("first event must be %q", invocation.EventCreated)
	}
	var r invocation.Record
	var usage UsageDelta
	for i := range events {
		events[i].Seq = int64(i + 1)
		events[i].At = storedTime(events[i].At)
		if i > 0 && events[i].At.Before(r.UpdatedAt) {
			events[i].At = r.UpdatedAt // at never goes backwards with seq (see Append)
		}
		next, err := invocation.Apply(r, events[i])
		if err != nil {
			return r, err
		}
		usage.Add(r, events[i], next)
		r = next
		events[i].InvocationID = r.ID
	}
	if r.ID == "" || r.TenantID == "" {
		return r, errors.New("created event must carry the invocation id and tenant")
	}
	seen := map[string]bool{}
	for _, e := range events {
		if e.IdempotencyKey == "" || seen[e.IdempotencyKey] {
			return r, errors.New("invocation events need distinct idempotency keys")
		}
		seen[e.IdempotencyKey] = true
	}
	if err := t.writeRecord(r, true, &sched, nil); err != nil {
		return r, err
	}
	if err := t.insertNew(events); err != nil {
		return r, err
	}
	return r, t.W.WriteUsage(&usage)
}

// insertNew logs the events of an invocation just inserted: several in multi-row inserts, and one
// by one only when those did not insert them all (which then reports why).
func (t *Tx) insertNew(events []invocation.Event) error {
	if len(events) > 1 {
		if all, err := t.W.InsertInvocationEvents(events); err != nil || all {
			return err
		}
	}
	for _, e := range events {
		if _, err := t.W.InsertInvocationEvent(e); err != nil {
			return err
		}
	}
	return nil
}

// Append implements store.Tx. Its read of the projection locks the invocation's row (Dialect.ForUpdate)
// until the transaction ends: a write of another process to the same invocation (an append, a
// claim reclaiming its lease) waits for it and then reads what it wrote, so the lease check and
// Expect's last_seq check hold across processes as they do in one.
func (t *Tx) Append(req store.AppendRequest) (invocation.Record, []invocation.Event, error) {
	r, pre, err := t.lockProjection(req.TenantID, req.InvocationID, req.AppendOptions, len(req.Events) > 0)
	if err != nil {
		return r, nil, err
	}
	r, appended, err := t.appendOn(r, pre, req)
	if err != nil && pre != nil {
		t.Missed = true // an optimistic run's error may come of its assumption (Tx.Missed)
	}
	return r, appended, err
}

// appendOn is Append after its read of the projection r (and pre, an optimistic run's
// precondition).
func (t *Tx) appendOn(r invocation.Record, pre *precondition, req store.AppendRequest) (invocation.Record, []invocation.Event, error) {
	var usage UsageDelta
	r, appended, advances, err := t.foldEvents(r, req.InvocationID, req.Events, &usage)
	if err != nil {
		return r, nil, err
	}
	err = t.storeProjection(r, req.TenantID, req.InvocationID, len(appended) > 0, advances, req.Schedule, pre)
	if err == nil {
		err = t.W.WriteUsage(&usage)
	}
	if err != nil {
		return r, nil, err
	}
	return r, appended, nil
}

// lockProjection is Append's read of the projection the events are folded into, locking its row.
// It is the caller's Expect when the stored last_seq matches it, or, in an optimistic transaction,
// Expect taken as current with the precondition that makes the projection's update conditional on
// it; otherwise the stored record. It then checks the lease RequireLease names, unless the
// precondition carries it.
func (t *Tx) lockProjection(tenantID, invocationID string, opt store.AppendOptions, hasEvents bool) (invocation.Record, *precondition, error) {
	var doc string
	var owner sql.NullString
	var r invocation.Record
	fresh := false
	var pre *precondition
	if x := opt.Expect; x != nil && x.ID == invocationID && x.TenantID == tenantID && t.Optimistic && hasEvents {
		// The caller's projection is taken as current, and the projection's update below is made
		// conditional on it (and on the lease): a transaction where it was not is replayed.
		r, fresh = *x, true
		pre = &precondition{lastSeq: x.LastSeq, owner: opt.RequireLease}
	} else if x != nil && x.ID == invocationID && x.TenantID == tenantID {
		var last int64
		err := t.Q.QueryRowContext(bg, "SELECT last_seq, lease_owner FROM invocations WHERE id = ? AND tenant_id = ?"+t.D.ForUpdate(), invocationID, tenantID).Scan(&last, &owner)
		if err != nil {
			return r, nil, NotFound(err, "invocation")
		}
		if last == x.LastSeq {
			r, fresh = *x, true
		} else if opt.ExpectOnly {
			return r, nil, fmt.Errorf("invocation %s: last_seq %d, not the expected %d: %w", invocationID, last, x.LastSeq, store.ErrConflict)
		}
	}
	if !fresh {
		var last int64
		var updated string
		err := t.Q.QueryRowContext(bg, "SELECT record, lease_owner, last_seq, updated_at FROM invocations WHERE id = ? AND tenant_id = ?"+t.D.ForUpdate(),
			invocationID, tenantID).Scan(&doc, &owner, &last, &updated)
		if err != nil {
			return r, nil, NotFound(err, "invocation")
		}
		if r, err = DecodeRecord(doc, last, updated); err != nil {
			return r, nil, err
		}
	}
	if pre == nil && opt.RequireLease != "" && owner.String != opt.RequireLease {
		return r, nil, fmt.Errorf("invocation %s: %w", invocationID, store.ErrLeaseLost)
	}
	return r, pre, nil
}

// foldEvents is Append's fold: it numbers and stamps each event, applies it to r and logs it,
// recording what it uses in usage (Append's, empty). It returns the projection after the events,
// the events appended (replays already in the log are skipped), and whether every appended event
// changed nothing but last_seq and updated_at (invocation.OnlyAdvances). On an error it returns
// the projection as folded so far. Several events are logged with multi-row inserts (foldBatch)
// unless one of them is a replay.
func (t *Tx) foldEvents(r invocation.Record, invocationID string, events []invocation.Event, usage *UsageDelta) (invocation.Record, []invocation.Event, bool, error) {
	if len(events) > 1 {
		next, appended, advances, batch, err := t.foldBatch(r, invocationID, events)
		if err != nil || appended != nil {
			*usage = batch
			return next, appended, advances, err
		}
	}
	return t.foldEach(r, invocationID, events, usage)
}

// foldBatch is foldEvents' common case for several events: none of them is in the log yet. It
// folds them all, then logs them with multi-row inserts (Writes.InsertInvocationEvents). When an
// event does not apply or the inserts did not take every row (a replay), it returns no events and
// has logged none, and foldEach then goes event by event, as 003 §1.3 requires of replays.
func (t *Tx) foldBatch(r invocation.Record, invocationID string, events []invocation.Event) (invocation.Record, []invocation.Event, bool, UsageDelta, error) {
	var usage UsageDelta
	out := make([]invocation.Event, len(events))
	next := r
	advances := true
	for i, e := range events {
		e.InvocationID = invocationID
		e.Seq = next.LastSeq + 1
		e.At = storedTime(e.At)
		if e.At.Before(next.UpdatedAt) {
			e.At = next.UpdatedAt // see foldEach
		}
		after, err := invocation.Apply(next, e)
		if err != nil {
			return r, nil, false, UsageDelta{}, nil
		}
		advances = advances && invocation.OnlyAdvances(next, e)
		usage.Add(next, e, after)
		next, out[i] = after, e
	}
	all, err := t.W.InsertInvocationEvents(out)
	if err != nil {
		return r, nil, false, UsageDelta{}, err
	}
	if !all {
		return r, nil, false, UsageDelta{}, nil
	}
	return next, out, advances, usage, nil
}

// foldEach is foldEvents one event at a time: each event is logged unless its key already is.
func (t *Tx) foldEach(r invocation.Record, invocationID string, events []invocation.Event, usage *UsageDelta) (invocation.Record, []invocation.Event, bool, error) {
	var appended []invocation.Event
	advances := true // every appended event changes nothing but last_seq and updated_at
	for _, e := range events {
		e.InvocationID = invocationID
		e.Seq = r.LastSeq + 1
		e.At = storedTime(e.At)
		if e.At.Before(r.UpdatedAt) {
			// Entries collected during an attempt and written later (or stamped by another process's
			// clock) may be older than the last one logged: at never goes backwards with seq. The
			// record's UpdatedAt is the at of its last event (invocation.Apply).
			e.At = r.UpdatedAt
		}
		next, err := invocation.Apply(r, e)
		if err != nil {
			// A replayed event may no longer apply (started, when already running): if its key is in
			// the log it is a no-op, as 003 §1.3 requires; only then is it an error. The probe runs on
			// this rare path only.
			if t.eventLogged(invocationID, e.IdempotencyKey) {
				continue
			}
			return r, nil, false, err
		}
		inserted, err := t.W.InsertInvocationEvent(e)
		if err != nil {
			return r, nil, false, err
		}
		if !inserted {
			continue // already in the log (003 §1.3): a no-op
		}
		advances = advances && invocation.OnlyAdvances(r, e)
		usage.Add(r, e, next)
		r = next
		appended = append(appended, e)
	}
	return r, appended, advances, nil
}

// eventLogged reports whether the invocation's log holds an event with the idempotency key key.
func (t *Tx) eventLogged(invocationID, key string) bool {
	var one int
	err := t.Q.QueryRowContext(bg, "SELECT 1 FROM invocation_events WHERE invocation_id = ? AND idempotency_key = ?",
		invocationID, key).Scan(&one)
	return err == nil
}

// storeProjection is Append's write of the projection r: only last_seq and updated_at when every
// appended event just advanced them and the queue state is not replaced, the whole record when
// events were appended or a schedule given, and otherwise (nothing to write) the optimistic
// precondition's check alone.
func (t *Tx) storeProjection(r invocation.Record, tenantID, invocationID string, appended, advances bool, sched *store.Scheduling, pre *precondition) error {
	switch {
	case appended && advances && sched == nil:
		return t.advanceRecord(r, pre)
	case appended || sched != nil:
		return t.writeRecord(r, false, sched, pre)
	case pre != nil:
		return t.checkPrecondition(invocationID, tenantID, pre)
	}
	return nil
}

// advanceRecord stores r after appends that moved only its last_seq and updated_at
// (invocation.OnlyAdvances: journal entries, step and log timeline entries, the bulk of a workflow's
// writes). It sets those two columns and leaves the record JSON alone: the columns are the
// projection's last_seq and updated_at (DecodeRecord), so neither the record nor the status column
// (and so its indexes) is rewritten.
func (t *Tx) advanceRecord(r invocation.Record, pre *precondition) error {
	return t.execUpdate(`UPDATE invocations SET last_seq = ?, updated_at = ? WHERE id = ?`, []any{r.LastSeq, TS(r.UpdatedAt), r.ID}, pre)
}

// Invocations implements store.Tx.
func (t *Tx) Invocations(rs []store.Runnable) ([]invocation.Record, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	args := make([]any, len(rs))
	for i, r := range rs {
		args[i] = r.InvocationID
	}
	rows, err := t.Q.QueryContext(bg, "SELECT tenant_id, id, record, last_seq, updated_at FROM invocations WHERE id IN (?"+
		strings.Repeat(", ?", len(rs)-1)+")", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byID := make(map[string]invocation.Record, len(rs))
	for rows.Next() {
		var tenantID, id, doc, updated string
		var last int64
		if err := rows.Scan(&tenantID, &id, &doc, &last, &updated); err != nil {
			return nil, err
		}
		rec, err := DecodeRecord(doc, last, updated)
		if err != nil {
			return nil, err
		}
		byID[tenantID+"\x00"+id] = rec
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]invocation.Record, 0, len(rs))
	for _, r := range rs {
		if rec, ok := byID[r.TenantID+"\x00"+r.InvocationID]; ok {
			out = append(out, rec)
		}
	}
	return out, nil
}

// InvocationHead implements store.Tx.
func (t *Tx) InvocationHead(tenantID, invocationID string) (store.Head, error) {
	var h store.Head
	var status string
	err := t.Q.QueryRowContext(bg, `SELECT status, last_seq, coalesce((SELECT idempotency_key FROM invocation_events
		WHERE invocation_id = i.id AND seq = i.last_seq), '') FROM invocations i WHERE id = ? AND tenant_id = ?`+t.D.ForUpdate(),
		invocationID, tenantID).Scan(&status, &h.LastSeq, &h.LastKey)
	if err != nil {
		return h, NotFound(err, "invocation")
	}
	h.Status = invocation.Status(status)
	return h, nil
}

// Invocation implements store.Tx.
func (t *Tx) Invocation(tenantID, invocationID string) (invocation.Record, error) {
	return readRecord(bg, t.Q, tenantID, invocationID)
}

// DecodeRecord is the projection stored as the record JSON and its hot columns: last_seq and
// updated_at are the columns' (the stores' advanceRecord moves only those), the rest is the JSON's.
func DecodeRecord(doc string, last int64, updated string) (invocation.Record, error) {
	return decodeRecord([]byte(doc), last, updated)
}

// decodeRecord is DecodeRecord of a document read as bytes (a list page's: no copy of a large
// document made only to decode it).
func decodeRecord(doc []byte, last int64, updated string) (invocation.Record, error) {
	var r invocation.Record
	doc, err := Unpack(doc)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(doc, &r); err != nil {
		return r, err
	}
	at, err := ParseTS(updated)
	if err != nil {
		return r, err
	}
	r.LastSeq, r.UpdatedAt = last, at
	return r, nil
}
