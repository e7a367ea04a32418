package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/cron"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
)

// SpanFire is the span of a schedule run the firing loop starts (docs/observability.md).
const SpanFire = "schedule.fire"

// SpanBackfill is the span of a backfill partition the driver starts (docs/observability.md).
const SpanBackfill = "backfill.partition"

// maxEnumerated bounds the instants one outage is enumerated over (a per-second schedule down
// for 11 days); past it the count of dropped instants is a lower bound.
const maxEnumerated = 1_000_000

// maxOnTime bounds the on-time instants one pass fires for one schedule.
const maxOnTime = 1000

// missed is what an outage left: the instants to run (oldest first), the ones before them to
// record as skipped, and how many older ones were only counted.
type missed struct {
	run, skip []time.Time
	dropped   int
	// next is the first instant at or after the end of the outage.
	next time.Time
}

// keepFor is how many missed instants a policy runs.
func keepFor(p schedule.MissedPolicy, maxCatchUp int) int {
	switch p {
	case schedule.MissedCatchUp:
		return maxCatchUp
	case schedule.MissedBackfill:
		return schedule.MaxBackfillRuns
	}
	return 0
}

// collect enumerates the instants from `from` (an instant) up to, not including, until: the latest
// keep of them are to run, the schedule.MaxSkippedRecorded before those to be recorded as skipped.
func collect(times cron.Schedule, from, until time.Time, keep int) missed {
	window := keep + schedule.MaxSkippedRecorded
	ring := make([]time.Time, 0, min(window, 1024))
	head, n := 0, 0
	t := from
	for ; !t.IsZero() && t.Before(until) && n < maxEnumerated; t = times.Next(t) {
		n++
		if len(ring) < window {
			ring = append(ring, t)
			continue
		}
		ring[head] = t
		head = (head + 1) % window
	}
	for !t.IsZero() && t.Before(until) { // past the bound: jump to the last instants before until
		t = times.Next(until.Add(-time.Second))
		if t.IsZero() || !t.Before(until) {
			break
		}
	}
	ordered := append(append([]time.Time(nil), ring[head:]...), ring[:head]...)
	var m missed
	m.next = t
	m.dropped = n - len(ordered)
	split := max(0, len(ordered)-keep)
	m.skip, m.run = ordered[:split], ordered[split:]
	return m
}

// job is a due schedule with what firing it needs, read before the firing transaction.
type job struct {
	sch       schedule.Schedule
	times     cron.Schedule
	plan      invoke.Planned
	skip      string // a reason every instant is skipped for (tenant disabled, entrypoint unavailable)
	skipMsg   string
	badTiming error
	// lags are the fire lags of the runs this job started in the firing transaction (recorded at
	// minus scheduled at; reported to Options.FireLag once it commits).
	lags []time.Duration
}

// reportLags hands the fire lags of committed jobs to Options.FireLag.
func (s *Service) reportLags(jobs []job) {
	if s.o.FireLag == nil {
		return
	}
	for i := range jobs {
		for _, l := range jobs[i].lags {
			s.o.FireLag(max(l, 0))
		}
	}
}

// FireDue fires every schedule due at the clock's now, in batches, and returns how many runs it
// started. Serve runs it from Run; tests call it after moving a fake clock. A schedule that cannot
// be fired is logged with its tenant id, counted (Options.Failed) and passed over for the rest of
// this call: it stays due, so the next call tries it again, and it never holds back the schedules
// due after it.
func (s *Service) FireDue(ctx context.Context) (int, error) {
	total := 0
	failed := map[string]bool{} // tenant/schedule ids that failed in this call
	for range 1000 {
		now := s.o.Clock.Now()
		// Failed schedules stay due (and first, by due time): read past them.
		limit := s.o.Batch + len(failed)
		rows, err := s.store.DueSchedules(ctx, now, limit)
		if err != nil {
			return total, err
		}
		due := rows[:0:0]
		for _, sch := range rows {
			if !failed[sch.TenantID+"/"+sch.ID] {
				due = append(due, sch)
			}
		}
		if len(due) == 0 {
			return total, nil
		}
		n, bad, err := s.fire(ctx, due, now)
		total += n
		for _, k := range bad {
			failed[k] = true
		}
		if err != nil || len(rows) < limit {
			return total, err
		}
	}
	return total, nil
}

// failedSchedule logs and counts a due schedule that could not be fired, and returns its key.
func (s *Service) failedSchedule(ctx context.Context, sch schedule.Schedule, err error) string {
	if ctx.Err() == nil {
		s.o.Failed(JobScheduler)
		s.o.Logger.Error("firing a schedule failed", "tenant_id", sch.TenantID, "schedule_id", sch.ID, "err", err)
	}
	return sch.TenantID + "/" + sch.ID
}

// Run fires schedules as they fall due, and drives running backfills every poll, until ctx ends.
func (s *Service) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := s.FireDue(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("firing schedules", "err", err)
		}
		if _, err := s.DriveBackfills(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("driving backfills", "err", err)
		}
		wait := s.o.Poll
		if next, err := s.store.NextScheduleDue(ctx); err == nil && next != nil {
			wait = min(wait, max(next.Sub(s.o.Clock.Now()), 0))
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

type planKey struct{ tenant, entrypoint, subject, params string }

type planned struct {
	p   invoke.Planned
	err error
}

// fire fires one batch of due schedules in one transaction, or one by one when the batch fails. It
// returns the runs started and the keys (tenant/schedule id) of the schedules that failed.
func (s *Service) fire(ctx context.Context, due []schedule.Schedule, now time.Time) (int, []string, error) {
	jobs, bad, err := s.prepareJobs(ctx, due)
	if err != nil {
		return 0, bad, err
	}
	created, replaced, err := s.fireJobs(ctx, jobs, now)
	if err != nil {
		if ctx.Err() != nil {
			return 0, bad, err
		}
		if len(jobs) == 1 {
			return 0, append(bad, s.failedSchedule(ctx, jobs[0].sch, err)), nil
		}
		// One schedule that cannot be fired must not hold back the others: fire them one by one,
		// and log the ones that fail (they stay due, and are tried again on the next pass).
		s.o.Logger.Error("firing a batch of schedules failed; firing them one by one", "err", err)
		return s.fireOneByOne(ctx, jobs, now, bad)
	}
	s.reportLags(jobs)
	s.afterFire(ctx, replaced)
	return len(created), bad, nil
}

// prepareJobs reads, before the firing transaction, what firing each due schedule needs: its
// timing, whether its tenant is enabled, and its plan (or why every instant is skipped). A schedule
// whose tenant cannot be read gets no job: its key is returned among the failed ones.
func (s *Service) prepareJobs(ctx context.Context, due []schedule.Schedule) ([]job, []string, error) {
	var bad []string
	enabled := map[string]bool{}
	plans := map[planKey]planned{}
	jobs := make([]job, 0, len(due))
	for _, sch := range due {
		j := job{sch: sch}
		if j.times, j.badTiming = Expression(sch.Expression, sch.Timezone); j.badTiming != nil {
			jobs = append(jobs, j)
			continue
		}
		on, ok := enabled[sch.TenantID]
		if !ok {
			p, err := s.store.Tenant(ctx, sch.TenantID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				if ctx.Err() != nil {
					return jobs, bad, err
				}
				bad = append(bad, s.failedSchedule(ctx, sch, fmt.Errorf("reading its tenant: %w", err)))
				continue // this tenant's other schedules try again (and fail alike, or succeed)
			}
			on = err != nil || p.Enabled
			enabled[sch.TenantID] = on
		}
		if !on {
			j.skip, j.skipMsg = schedule.SkipTenantDisabled, "the tenant is disabled"
			jobs = append(jobs, j)
			continue
		}
		s.planJob(ctx, &j, plans)
		jobs = append(jobs, j)
	}
	return jobs, bad, nil
}

// planJob sets the plan j runs as, from plans or planned now (and kept in plans); a schedule whose
// entrypoint cannot be planned skips its instants as unavailable.
func (s *Service) planJob(ctx context.Context, j *job, plans map[planKey]planned) {
	sch := j.sch
	// One plan per entrypoint, params and visibility: the system context of every schedule of a
	// tenant resolves alike (it owns nothing), so only its subject differs.
	as := runAs(sch)
	k := planKey{sch.TenantID, sch.EntrypointID, as.SubjectID, string(sch.InputOverrides)}
	if sch.ExecutionContext == schedule.ContextSystem {
		k.subject = ""
	}
	pl, ok := plans[k]
	if !ok {
		pl.p, pl.err = s.plan(ctx, sch, nil, "")
		plans[k] = pl
	}
	if pl.err != nil {
		j.skip, j.skipMsg = schedule.SkipUnavailable, pl.err.Error()
	}
	j.plan = pl.p.As(as.SubjectID)
}

// fireJobs fires jobs in one transaction, and returns the invocations it created and the previous
// runs to cancel once it committed. A job whose schedule changed or went away since it was read is
// passed over (the next pass reads it again); any other failure rolls the whole transaction back.
func (s *Service) fireJobs(ctx context.Context, jobs []job, now time.Time) ([]invocation.Record, []replacement, error) {
	var created []invocation.Record
	var replaced []replacement
	err := s.store.Update(ctx, func(tx store.Tx) error {
		created, replaced = created[:0], replaced[:0]
		for i := range jobs {
			jobs[i].lags = jobs[i].lags[:0]
			err := s.fireOne(tx, &jobs[i], now, &created, &replaced)
			if errors.Is(err, store.ErrStale) || errors.Is(err, store.ErrNotFound) {
				continue // changed or deleted since it was read: the next pass reads it again
			}
			if err != nil {
				return fmt.Errorf("schedule %s/%s: %w", jobs[i].sch.TenantID, jobs[i].sch.ID, err)
			}
		}
		return nil
	})
	return created, replaced, err
}

// fireOneByOne fires jobs each in a transaction of its own, after their batch failed. A job that
// fails is logged and counted, and its key added to bad; the others are fired (their lags reported,
// the runs they replace canceled). It returns the runs started and bad.
func (s *Service) fireOneByOne(ctx context.Context, jobs []job, now time.Time, bad []string) (int, []string, error) {
	n := 0
	for i := range jobs {
		created, replaced, err := s.fireJobs(ctx, jobs[i:i+1], now)
		if err != nil {
			if ctx.Err() != nil {
				return n, bad, err
			}
			bad = append(bad, s.failedSchedule(ctx, jobs[i].sch, err))
			continue
		}
		n += len(created)
		s.reportLags(jobs[i : i+1])
		s.afterFire(ctx, replaced)
	}
	return n, bad, nil
}

// afterFire cancels, once a firing transaction committed, the previous runs the replace policy
// replaces (the invocations it queued are reported by their own AfterCommit hooks).
func (s *Service) afterFire(ctx context.Context, replaced []replacement) {
	for _, r := range replaced {
		sc := auth.SecurityContext{TenantID: r.tenantID, SubjectID: "schedule:" + r.scheduleID, Roles: []auth.Role{auth.RoleAdmin}}
		if _, _, err := s.inv.Control(ctx, sc, r.invocationID, invoke.ActionCancel); err != nil {
			s.o.Logger.Warn("schedule replace: cancel of the previous run failed", "tenant_id", r.tenantID,
				"schedule_id", r.scheduleID, "invocation_id", r.invocationID, "err", err)
		}
	}
}

// replacement is a previous run that the replace policy cancels once the new one is committed.
type replacement struct{ tenantID, scheduleID, invocationID string }

// fireOne handles one due schedule inside the firing transaction: it records every instant due
// (and, by the missed policy, the missed ones), queues the invocations of the runs it starts, and
// arms the next instant. ErrStale: the schedule changed since it was read; nothing was written.
func (s *Service) fireOne(tx store.Tx, j *job, now time.Time, created *[]invocation.Record, replaced *[]replacement) error {
	sch, done, err := s.recheck(tx, j, now)
	if err != nil || done {
		return err
	}
	m, onTime, next := s.dueInstants(j, sch, now)

	// Runs and invocations are recorded at the clock's time now, in the transaction (not at the
	// start of the pass): their recorded_at - scheduled_at is the fire lag up to the commit.
	f := &firing{tx: tx, j: j, sch: &sch, recorded: s.o.Clock.Now(), created: created}
	if onTime, err = s.recordMissed(f, m, onTime); err != nil {
		return err
	}
	if f.inFlight, err = lastInFlight(tx, sch); err != nil {
		return err
	}
	// Catch-up runs go one after another: the oldest pending one starts when nothing is in flight.
	if sch.PendingCatchUpRuns > 0 && j.skip == "" && !f.inFlight {
		if err := s.startCatchUp(f); err != nil {
			return err
		}
	}
	if err := s.startOnTime(f, onTime, replaced); err != nil {
		return err
	}

	// Arm the next instant.
	sch.NextRunAt = nil
	if !next.IsZero() {
		sch.NextRunAt = &next
	}
	s.setDue(&sch, now)
	sch.UpdatedAt = f.recorded
	return tx.UpdateSchedule(&sch)
}

// recheck reads j's schedule again in the firing transaction. ErrStale: it changed since it was
// read. done: there is nothing to fire (its timing is bad, it is not active, or its policy changed
// since it was armed), and the schedule was stored disarmed or re-armed instead.
func (s *Service) recheck(tx store.Tx, j *job, now time.Time) (sch schedule.Schedule, done bool, err error) {
	sch, err = tx.Schedule(j.sch.TenantID, j.sch.ID)
	if err != nil {
		return sch, false, err
	}
	if sch.Revision != j.sch.Revision {
		return sch, false, store.ErrStale
	}
	if j.badTiming != nil || sch.Status != schedule.StatusActive || sch.NextRunAt == nil {
		sch.DueAt = nil
		return sch, true, tx.UpdateSchedule(&sch)
	}
	if sch.NextRunAt.After(now) && sch.PendingCatchUpRuns == 0 && sch.ConcurrencyPolicy != schedule.ConcurrencyAllow {
		s.setDue(&sch, now) // its policy changed since it was armed: look again at its instant
		return sch, true, tx.UpdateSchedule(&sch)
	}
	return sch, false, nil
}

// dueInstants is what sch has due at now: the instants an outage left (older than the grace), the
// on-time ones, and next, the first instant this pass does not handle. It logs the missed instants
// that were only counted.
func (s *Service) dueInstants(j *job, sch schedule.Schedule, now time.Time) (m missed, onTime []time.Time, next time.Time) {
	// The instants due: missed ones (older than the grace) and on-time ones.
	cut := now.Add(-s.o.Grace)
	from := *sch.NextRunAt
	if from.Before(cut) {
		m = collect(j.times, from, cut, keepFor(sch.MissedPolicy, sch.MaxCatchUpRuns))
		from = m.next
	}
	// On time: instants due by now, and for a schedule whose runs may overlap, those due within the
	// lookahead (queued now, runnable at their instant).
	horizon := now
	if sch.ConcurrencyPolicy == schedule.ConcurrencyAllow {
		horizon = now.Add(s.o.Lookahead)
	}
	t := from
	for ; !t.IsZero() && !t.After(horizon) && len(onTime) < maxOnTime; t = j.times.Next(t) {
		onTime = append(onTime, t)
	}
	next = t // the first instant not handled by this pass
	if m.dropped > 0 {
		s.o.Logger.Warn("schedule missed more instants than it records", "tenant_id", sch.TenantID, "schedule_id", sch.ID,
			"dropped", m.dropped, "missed_policy", sch.MissedPolicy)
	}
	return m, onTime, next
}

// firing is one due schedule being fired in the firing transaction: what starting its runs reads
// and updates (the schedule's last invocation and last run, whether a run is in flight, the
// invocations created in the transaction and the job's fire lags).
type firing struct {
	tx       store.Tx
	j        *job
	sch      *schedule.Schedule
	recorded time.Time // the clock's time in the transaction: every run and invocation is recorded at it
	created  *[]invocation.Record
	inFlight bool
}

// newRun is a run of f's schedule at instant at, recorded at f.recorded.
func (s *Service) newRun(f *firing, at time.Time, kind schedule.RunKind, state schedule.RunState) schedule.Run {
	return schedule.Run{ID: s.o.IDs.New("run"), TenantID: f.sch.TenantID, ScheduleID: f.sch.ID, ScheduledAt: at,
		Kind: kind, State: state, RecordedAt: f.recorded}
}

// recordMissed records the runs of the instants an outage left: the ones m skips, and the catch-up
// runs m keeps, pending (counted in the schedule's pending catch-up runs). A job whose every instant
// is skipped records them all (at most schedule.MaxSkippedRecorded, on-time ones included) as
// skipped for its reason instead. It returns the on-time instants left to fire: none for such a job.
func (s *Service) recordMissed(f *firing, m missed, onTime []time.Time) ([]time.Time, error) {
	j, sch := f.j, f.sch
	var runs []schedule.Run
	skip := func(at time.Time, reason, msg string) {
		r := s.newRun(f, at, schedule.KindScheduled, schedule.RunSkipped)
		r.SkipReason, r.Message = reason, msg
		runs = append(runs, r)
	}
	if j.skip != "" {
		all := append(append(append([]time.Time(nil), m.skip...), m.run...), onTime...)
		for _, at := range all[max(0, len(all)-schedule.MaxSkippedRecorded):] {
			skip(at, j.skip, j.skipMsg)
		}
		s.o.Logger.Warn("schedule skipped its runs", "tenant_id", sch.TenantID, "schedule_id", sch.ID,
			"skip_reason", j.skip, "instants", len(all), "detail", j.skipMsg)
	} else {
		for _, at := range m.skip {
			skip(at, schedule.SkipMissed, "")
		}
		for _, at := range m.run {
			runs = append(runs, s.newRun(f, at, schedule.KindCatchUp, schedule.RunPending))
		}
	}
	for i := range runs {
		if err := f.tx.InsertScheduleRun(runs[i]); err != nil && !errors.Is(err, store.ErrConflict) {
			return onTime, err
		}
	}
	if j.skip != "" {
		return nil, nil
	}
	sch.PendingCatchUpRuns += len(m.run)
	return onTime, nil
}

// lastInFlight reports whether sch's latest invocation is in flight (not finished). It is looked up
// only when it matters: catch-up runs are pending, or the schedule's runs may not overlap.
func lastInFlight(tx store.Tx, sch schedule.Schedule) (bool, error) {
	if sch.LastInvocationID != "" && (sch.PendingCatchUpRuns > 0 || sch.ConcurrencyPolicy != schedule.ConcurrencyAllow) {
		rec, err := tx.Invocation(sch.TenantID, sch.LastInvocationID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		return err == nil && !rec.Status.Terminal(), nil
	}
	return false, nil
}

// beginRun marks r started under a new invocation id; enqueueRun queues that invocation once r is
// recorded (so that an instant recorded already never queues a second invocation).
func (s *Service) beginRun(f *firing, r *schedule.Run) {
	r.State, r.InvocationID, r.RecordedAt = schedule.RunStarted, s.inv.NewID(), f.recorded
}

// enqueueRun queues the invocation of the started run r, in a span of its own, and makes it f's
// schedule's last invocation (and r's instant its last run, if later), in flight.
func (s *Service) enqueueRun(f *firing, r schedule.Run) error {
	sch := f.sch
	// The run's span: its invocation is created in its trace (the attempts are its children).
	ctx, span := s.o.Tracer.Start(f.tx.Context(), SpanFire, trace.WithAttributes(tracing.AttrTenant.String(sch.TenantID),
		tracing.AttrSchedule.String(sch.ID), tracing.AttrScheduledAt.String(r.ScheduledAt.UTC().Format(time.RFC3339Nano)),
		tracing.AttrInvocation.String(r.InvocationID)))
	defer span.End()
	rec, err := s.inv.EnqueueAt(f.tx, f.j.plan.InTrace(ctx), r.InvocationID, f.recorded, r.ScheduledAt)
	if err != nil {
		span.SetStatus(codes.Error, "not queued")
		return err
	}
	*f.created = append(*f.created, rec)
	f.j.lags = append(f.j.lags, f.recorded.Sub(r.ScheduledAt))
	sch.LastInvocationID, f.inFlight = rec.ID, true
	if sch.LastRunAt == nil || r.ScheduledAt.After(*sch.LastRunAt) {
		at := r.ScheduledAt
		sch.LastRunAt = &at
	}
	return nil
}

// startCatchUp starts the oldest pending catch-up run of f's schedule, or, if none is left,
// resets its count of pending catch-up runs.
func (s *Service) startCatchUp(f *firing) error {
	sch := f.sch
	pending, err := f.tx.PendingRuns(sch.TenantID, sch.ID, 1)
	if err != nil {
		return err
	}
	if len(pending) == 0 {
		sch.PendingCatchUpRuns = 0
		return nil
	}
	r := pending[0]
	s.beginRun(f, &r)
	if err := f.tx.UpdateScheduleRun(r); err != nil {
		return err
	}
	if err := s.enqueueRun(f, r); err != nil {
		return err
	}
	sch.PendingCatchUpRuns--
	return nil
}

// startOnTime records a run for each on-time instant and starts it, unless a run is in flight and
// the concurrency policy forbids overlap (skipped) or replaces it (the previous run is added to
// replaced, to be canceled once the transaction commits). An instant recorded already is passed.
func (s *Service) startOnTime(f *firing, onTime []time.Time, replaced *[]replacement) error {
	sch := f.sch
	for _, at := range onTime {
		r := s.newRun(f, at, schedule.KindScheduled, schedule.RunStarted)
		if f.inFlight {
			switch sch.ConcurrencyPolicy {
			case schedule.ConcurrencyForbid:
				r.State, r.SkipReason, r.PreviousInvocationID = schedule.RunSkipped, schedule.SkipForbid, sch.LastInvocationID
			case schedule.ConcurrencyReplace:
				r.PreviousInvocationID = sch.LastInvocationID
			}
		}
		if r.State == schedule.RunStarted {
			s.beginRun(f, &r)
		}
		err := f.tx.InsertScheduleRun(r)
		if errors.Is(err, store.ErrConflict) {
			continue // recorded already: an instant fires once
		}
		if err != nil {
			return err
		}
		if r.State != schedule.RunStarted {
			continue
		}
		if r.PreviousInvocationID != "" {
			*replaced = append(*replaced, replacement{sch.TenantID, sch.ID, r.PreviousInvocationID})
		}
		if err := s.enqueueRun(f, r); err != nil {
			return err
		}
	}
	return nil
}
