package eventtrigger

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/eventfilter"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/trigger"
	"github.com/larkrun/lark/internal/waits"
)

// Params of a trigger's invocation. Unbatched: {"event": E}; batched: {"events": [E, ...]} in
// arrival order, where E is the event as r_wait_event_v1 returns it (waits.EventValue: event_id,
// event_type_id, payload, received_at, and source, subject, time when set).
func eventParams(evs []events.Event, batched bool) (json.RawMessage, error) {
	if !batched {
		return json.Marshal(map[string]any{"event": waits.EventValue(evs[0])})
	}
	list := make([]any, len(evs))
	for i := range evs {
		list[i] = waits.EventValue(evs[i])
	}
	return json.Marshal(map[string]any{"events": list})
}

// Match implements eventbus.Subscriber: inside the transaction that stores ev, every active trigger
// of its tenant for its type whose filter matches starts its invocation (or adds ev to its pending
// batch, flushed at once when that makes it full). It returns how many triggers took the event.
// A trigger whose invocation cannot be planned (its entrypoint was deleted or disabled since, the
// params do not match its schema) records a dead letter with the error instead: the publish
// succeeds.
func (s *Service) Match(tx store.Tx, ev events.Event, now time.Time, prepared any) (int, error) {
	var ts []trigger.Trigger
	var matched []bool // from Prepare, when its triggers are still the active ones
	if p, ok := prepared.(*prematch); ok && s.cache.current(p.gen) {
		ts, matched = p.ts, p.matched
	} else {
		var err error
		if ts, err = s.active(tx, ev.TenantID, ev.TypeID); err != nil {
			return 0, err
		}
	}
	if len(ts) == 0 {
		return 0, nil
	}
	m := eventfilter.NewMatcher(eventfilter.Event{ID: ev.ID, TypeID: ev.TypeID, Source: ev.Source, Subject: ev.Subject}, ev.Payload)
	n := 0
	// Every trigger's received (and filtered-out) count.
	deltas := make([]trigger.MetricsDelta, len(ts))
	for i := range ts {
		t := &ts[i]
		d := &deltas[i]
		*d = trigger.MetricsDelta{TenantID: t.TenantID, TriggerID: t.ID, Hour: now, LatencyMS: -1}
		d.Received = 1
		if matched != nil && !matched[i] || matched == nil && !m.Matches(t.EventFilterQuery) {
			d.FilteredOut = 1
			continue
		}
		n++
		if !t.Batch.Enabled {
			if err := s.start(tx, *t, []events.Event{ev}, now); err != nil {
				return n, err
			}
			continue
		}
		if err := tx.AddPending(t.TenantID, t.ID, ev); err != nil {
			return n, err
		}
		pending, err := tx.CountPending(t.TenantID, t.ID)
		if err != nil {
			return n, err
		}
		if pending >= t.Batch.MaxSize {
			if err := s.flushAll(tx, t, now, false); err != nil {
				return n, err
			}
		} else {
			// The first pending event arms the batch (the trigger read may be cached: its due
			// time is decided by the row).
			armed, err := tx.ArmBatch(t.TenantID, t.ID, ev.ReceivedAt.Add(time.Duration(t.Batch.MaxWaitMS)*time.Millisecond))
			if err != nil {
				return n, err
			}
			if armed {
				tx.AfterCommit(s.Wake)
			}
		}
	}
	// Counted once the publish commits, and written with others' (FlushMetrics): one metrics row
	// per active trigger in every publishing transaction would be most of its writing.
	tx.AfterCommit(func() { s.metrics.add(deltas) })
	return n, nil
}

// flushAll flushes t's pending events as batches of at most max_size in arrival order, leaving in the pending table only a last batch that is neither full
// nor due (all: nothing); it sets the trigger's batch due time to what remains.
func (s *Service) flushAll(tx store.Tx, t *trigger.Trigger, now time.Time, all bool) error {
	size := t.Batch.MaxSize
	if size <= 0 {
		size = trigger.MaxBatchSize
	}
	wait := time.Duration(t.Batch.MaxWaitMS) * time.Millisecond
	for {
		evs, err := tx.PendingBatch(t.TenantID, t.ID, size)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			t.BatchDueAt = nil
			return tx.SetBatchDue(t.TenantID, t.ID, nil)
		}
		if !all && len(evs) < size && now.Before(evs[0].ReceivedAt.Add(wait)) {
			due := evs[0].ReceivedAt.Add(wait)
			t.BatchDueAt = &due
			return tx.SetBatchDue(t.TenantID, t.ID, &due)
		}
		if err := tx.RemovePending(t.TenantID, t.ID, evs[len(evs)-1].Seq); err != nil {
			return err
		}
		if err := s.start(tx, *t, evs, now); err != nil {
			return err
		}
	}
}

// start plans and queues t's invocation for evs (one event, or a batch) in tx, with its start
// record; an invocation that cannot be planned becomes a dead letter.
func (s *Service) start(tx store.Tx, t trigger.Trigger, evs []events.Event, now time.Time) error {
	params, err := eventParams(evs, t.Batch.Enabled)
	if err != nil {
		return err
	}
	seqs := make([]int64, len(evs))
	ids := make([]string, len(evs))
	for i := range evs {
		seqs[i], ids[i] = evs[i].Seq, evs[i].ID
	}
	publisher := evs[0].PublishedBy
	p, err := s.inv.Plan(tx.Context(), invoke.SystemStart{As: runAs(t, publisher), EntrypointID: t.EntrypointID, Params: params,
		CorrelationID: evs[0].CorrelationID, Retry: retryPolicy(t), Trigger: true, Origin: invocation.OriginEventTrigger})
	if err != nil {
		if problem.From(err).Status >= 500 {
			return err // not the trigger's fault (the store, a timeout): the publish fails and can be retried
		}
		return s.unplanned(tx, t, ids, params, err, now)
	}
	id := s.inv.NewID()
	if _, err := s.inv.Enqueue(tx, p, id, now); err != nil {
		return err
	}
	if err := tx.InsertTriggerStart(trigger.Start{TenantID: t.TenantID, InvocationID: id, TriggerID: t.ID, EventSeqs: seqs,
		EventIDs: ids, ReceivedAt: evs[0].ReceivedAt, StartedAt: now, Params: params}); err != nil {
		return err
	}
	d := trigger.MetricsDelta{TenantID: t.TenantID, TriggerID: t.ID, Hour: now, LatencyMS: -1}
	d.Triggered = 1
	s.observe(tx, t.TenantID, OutcomeFired)
	return tx.AddTriggerMetrics(d)
}

// unplanned records a start that could not be planned: a dead letter with the error (when the
// trigger's DLQ is enabled) and a failure in its metrics.
func (s *Service) unplanned(tx store.Tx, t trigger.Trigger, ids []string, params json.RawMessage, cause error, now time.Time) error {
	s.o.Logger.Warn("trigger: its invocation could not be started", "tenant_id", t.TenantID, "trigger_id", t.ID, "err", cause)
	d := trigger.MetricsDelta{TenantID: t.TenantID, TriggerID: t.ID, Hour: now, LatencyMS: -1}
	d.Failed = 1
	s.observe(tx, t.TenantID, OutcomeRefused)
	if t.DeadLetterQueue.Enabled {
		raw, err := json.Marshal(map[string]any{"type": "start_refused", "message": cause.Error()})
		if err != nil {
			return err
		}
		if err := tx.InsertDeadLetter(trigger.DeadLetter{ID: s.o.IDs.New("dlq"), TenantID: t.TenantID, TriggerID: t.ID,
			EventIDs: ids, Error: raw, Params: params, CreatedAt: now}); err != nil {
			return err
		}
		d.DeadLettered = 1
		s.observe(tx, t.TenantID, OutcomeDeadLettered)
	}
	return tx.AddTriggerMetrics(d)
}

// InvocationEnded implements writer.EndHook: when an invocation a trigger started ends (once), it
// counts it in the trigger's metrics with its latency (first event received → end), and when it
// failed (failed, dead_lettered or compensated: after its retries) it writes a dead letter with
// the error, in the transaction of the end. A canceled invocation counts as failed, without a
// dead letter.
func (s *Service) InvocationEnded(tx store.Tx, rec invocation.Record) error {
	if rec.Via == invocation.ViaOther {
		return nil // not a trigger's: nothing to read (records older than Via are looked up)
	}
	end := s.o.Clock.Now()
	if rec.FinishedAt != nil {
		end = *rec.FinishedAt
	}
	st, ended, err := tx.EndTriggerStart(rec.TenantID, rec.ID, end)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !ended) {
		return nil
	}
	if err != nil {
		return err
	}
	t, err := tx.Trigger(st.TenantID, st.TriggerID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted since: nothing to count
	}
	if err != nil {
		return err
	}
	d := trigger.MetricsDelta{TenantID: t.TenantID, TriggerID: t.ID, Hour: end, LatencyMS: max(end.Sub(st.ReceivedAt).Milliseconds(), 0)}
	switch rec.Status {
	case invocation.StatusSucceeded:
		d.Succeeded = 1
	case invocation.StatusCanceled:
		d.Failed = 1
	default:
		d.Failed = 1
		if t.DeadLetterQueue.Enabled {
			var raw json.RawMessage
			if rec.Error != nil {
				if raw, err = json.Marshal(rec.Error); err != nil {
					return err
				}
			}
			err := tx.InsertDeadLetter(trigger.DeadLetter{ID: s.o.IDs.New("dlq"), TenantID: t.TenantID, TriggerID: t.ID,
				EventIDs: st.EventIDs, InvocationID: rec.ID, Error: raw, Params: st.Params, CreatedAt: end})
			if err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
			if err == nil {
				d.DeadLettered = 1
				s.observe(tx, t.TenantID, OutcomeDeadLettered)
			}
		}
	}
	return tx.AddTriggerMetrics(d)
}

// FlushDue flushes every batch due at the clock's now and returns how many invocations it started.
// Run calls it; tests call it after moving a fake clock. A trigger whose batch cannot be flushed is
// logged with its tenant id, counted (Options.Failed) and passed over for this call.
func (s *Service) FlushDue(ctx context.Context) (int, error) {
	total := 0
	failed := map[string]bool{}
	for range 1000 {
		now := s.o.Clock.Now()
		limit := s.o.Batch + len(failed)
		rows, err := s.store.DueBatches(ctx, now, limit)
		if err != nil {
			return total, err
		}
		progressed := false
		for _, t := range rows {
			key := t.TenantID + "/" + t.ID
			if failed[key] {
				continue
			}
			progressed = true
			n := 0
			// The pass's span: the batches' invocations are created in its trace.
			sctx, span := s.o.Tracer.Start(ctx, SpanFlush, trace.WithAttributes(tracing.AttrTenant.String(t.TenantID),
				tracing.AttrTrigger.String(t.ID)))
			err := s.store.Update(sctx, func(tx store.Tx) error {
				n = 0
				cur, err := tx.Trigger(t.TenantID, t.ID)
				if errors.Is(err, store.ErrNotFound) {
					return nil
				}
				if err != nil {
					return err
				}
				if cur.BatchDueAt == nil || cur.BatchDueAt.After(now) {
					return nil // flushed or moved since it was read
				}
				counting := &countingTx{Tx: tx}
				err = s.flushAll(counting, &cur, now, false)
				n = counting.starts
				return err
			})
			if err != nil {
				span.SetStatus(codes.Error, "not flushed")
			} else {
				span.SetAttributes(tracing.AttrStarted.Int(n)) // 0: another node flushed it first
			}
			span.End()
			if err != nil {
				if ctx.Err() != nil {
					return total, err
				}
				failed[key] = true
				s.o.Failed(JobTriggers)
				s.o.Logger.Error("flushing a trigger's batch failed", "tenant_id", t.TenantID, "trigger_id", t.ID, "err", err)
				continue
			}
			total += n
		}
		if !progressed || len(rows) < limit {
			return total, nil
		}
	}
	return total, nil
}

// countingTx counts the trigger starts written through it.
type countingTx struct {
	store.Tx
	starts int
}

// InsertTriggerStart implements store.Tx.
func (c *countingTx) InsertTriggerStart(st trigger.Start) error {
	err := c.Tx.InsertTriggerStart(st)
	if err == nil {
		c.starts++
	}
	return err
}

// Run flushes batches as they fall due until ctx ends: after a restart too, since the pending
// batches and their due times are in the store.
func (s *Service) Run(ctx context.Context) {
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.FlushMetrics(fctx); err != nil {
			s.o.Logger.Error("writing trigger metrics at stop", "err", err)
		}
	}()
	lastMetrics := time.Now()
	for ctx.Err() == nil {
		if time.Since(lastMetrics) >= MetricsFlushInterval {
			lastMetrics = time.Now()
			if err := s.FlushMetrics(ctx); err != nil && ctx.Err() == nil {
				s.o.Failed(JobTriggers)
				s.o.Logger.Error("writing trigger metrics", "err", err)
			}
		}
		if _, err := s.FlushDue(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("flushing trigger batches", "err", err)
		}
		// A batch still due after a pass is one that failed (a flush moves or clears its due time):
		// it is tried again after a poll, not in a tight loop.
		wait := min(s.o.Poll, MetricsFlushInterval)
		if next, err := s.store.NextBatchDue(ctx); err == nil && next != nil {
			if d := next.Sub(s.o.Clock.Now()); d > 0 {
				wait = min(wait, d)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-s.wake.C():
		case <-t.C:
		}
		t.Stop()
	}
}

// prematch is what Prepare evaluated: the filters of the active triggers the cache held for the
// event's tenant and type, under generation gen.
type prematch struct {
	gen     uint64
	ts      []trigger.Trigger
	matched []bool
}

// Prepare implements eventbus.Subscriber: with the event's active triggers in the cache, it
// evaluates their filters before the publishing transaction (so that the store's single writer
// does not), and Match uses the result if no trigger changed meanwhile. Without them (a cold
// cache, a store shared with other processes) it returns nil and Match evaluates inside.
func (s *Service) Prepare(ev events.Event) any {
	c := s.cache
	if c == nil {
		return nil
	}
	c.mu.Lock()
	gen := c.gen
	e, ok := c.m[[2]string{ev.TenantID, ev.TypeID}]
	c.mu.Unlock()
	if !ok || e.gen != gen {
		return nil
	}
	p := &prematch{gen: gen, ts: slices.Clone(e.ts), matched: make([]bool, len(e.ts))}
	m := eventfilter.NewMatcher(eventfilter.Event{ID: ev.ID, TypeID: ev.TypeID, Source: ev.Source, Subject: ev.Subject}, ev.Payload)
	for i := range p.ts {
		p.matched[i] = m.Matches(p.ts[i].EventFilterQuery)
	}
	return p
}

// current reports whether gen is still the cache's generation (no trigger changed since).
func (c *activeCache) current(gen uint64) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen == gen
}

// activeCache keeps the decoded active triggers of a tenant and event type between publishes (a
// publish would otherwise read and decode them all). Every committed write of a trigger through
// the Service moves gen and empties it; an entry filled under an older gen is not kept. It is used
// only when this process is the store's only user (store.Exclusive): no other process writes
// triggers behind its back.
type activeCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[[2]string]activeEntry
}

type activeEntry struct {
	gen uint64
	ts  []trigger.Trigger
}

// maxActiveEntries bounds the cache; over it, it starts afresh.
const maxActiveEntries = 10000

// invalidate is called after a trigger write commits.
func (c *activeCache) invalidate() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.gen++
	clear(c.m)
	c.mu.Unlock()
}

// active returns the tenant's active triggers of an event type, from the cache when it is fresh. The
// caller gets its own copy of the slice.
func (s *Service) active(tx store.Tx, tenantID, typeID string) ([]trigger.Trigger, error) {
	c := s.cache
	if c == nil {
		return tx.ActiveTriggers(tenantID, typeID)
	}
	k := [2]string{tenantID, typeID}
	c.mu.Lock()
	gen := c.gen
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && e.gen == gen {
		return slices.Clone(e.ts), nil
	}
	ts, err := tx.ActiveTriggers(tenantID, typeID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.gen == gen {
		if len(c.m) >= maxActiveEntries {
			clear(c.m)
		}
		c.m[k] = activeEntry{gen: gen, ts: slices.Clone(ts)}
	}
	c.mu.Unlock()
	return ts, nil
}
