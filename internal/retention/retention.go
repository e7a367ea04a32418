// Package retention is the maintenance job that enforces each tenant's retention policy (000's
// TenantRuntimePolicy): it deletes finished execution history older than
// retention.execution_history_days (invocations with their event logs, and published events), audit
// events older than retention.audit_log_days, and the oldest finished history while the tenant is
// over quotas.max_execution_history_mb; cluster-wide, the remote workers not seen for WorkersKept
// (GET /workers). It also keeps the per-tenant history size the usage API
// reports (store.Reader.TenantHistoryBytes) up to date.
//
// Every delete is a bounded batch in its own transaction, so the single SQLite writer is never held
// long and a process that stops mid-pass leaves consistent data: the next pass carries on. One
// process runs the job at a time (the SQLite deployment has one).
//
// Failures are isolated: a step that fails for one tenant (measuring, purging history, events,
// schedule runs or audit events) is logged with the tenant id and counted (Options.Failed, the
// lark_maintenance_failures_total{job="retention"} metric), and the pass goes on with that tenant's
// next step and with the next tenants. One tenant's bad data can cost that tenant its own
// maintenance, never anyone else's.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Defaults of Options.
const (
	DefaultInterval  = 5 * time.Minute
	DefaultBatchRows = 1000
	// DefaultPlatformAuditDays is how long audit events of the platform tenant (system entrypoints),
	// which has no policy of its own, are kept: 000's default audit_log_days.
	DefaultPlatformAuditDays = 90
	// MB is the unit of quotas.max_execution_history_mb.
	MB = 1 << 20
	// JobName names this job in Options.Failed and in lark_maintenance_failures_total{job}.
	JobName = "retention"
)

// TriggerMetricsKept is how long event triggers' hourly metrics are kept: the longest metrics window
// (GET /triggers/{id}/metrics?window=90d).
const TriggerMetricsKept = 90 * 24 * time.Hour

// WorkersKept is how long a worker not seen any more keeps its row (GET /workers).
const WorkersKept = 7 * 24 * time.Hour

// measureBatch bounds the invocations measured per read and recorded per transaction.
const measureBatch = 500

// Options tune a Job.
type Options struct {
	// Interval is the time between the starts of two passes (default 5 min). It is wall-clock time;
	// what is old is decided on Clock.
	Interval time.Duration
	// BatchRows bounds the rows one delete transaction removes (default 1,000).
	BatchRows int
	// PlatformAuditDays is the audit retention of the platform tenant (default 90).
	PlatformAuditDays int64
	Clock             clock.Clock
	Logger            *slog.Logger
	// Failed is called with JobName for every failed step of a tenant's pass (nil: not counted);
	// the server counts it in lark_maintenance_failures_total.
	Failed func(job string)
	// Passed, when set, hears of each pass that ran to its end (not one cut short by ctx ending):
	// whether every step of it succeeded, and what it purged over all tenants. The server counts it
	// in lark_retention_passes_total and lark_retention_purged_total.
	Passed func(ok bool, total Purged)
}

// Store is the store methods the retention job uses (store.Store has them all): the retention
// reads, and Update for its measurements and purges.
type Store interface {
	store.RetentionReader
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Job is the retention maintenance job.
type Job struct {
	st Store
	o  Options
}

// New returns a Job over st.
func New(st Store, o Options) *Job {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.BatchRows <= 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.PlatformAuditDays <= 0 {
		o.PlatformAuditDays = DefaultPlatformAuditDays
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Failed == nil {
		o.Failed = func(string) {}
	}
	return &Job{st: st, o: o}
}

// Run runs a pass at once and then one every Interval until ctx ends. Failures are logged (each
// tenant's by RunOnce) and the next pass retries.
func (j *Job) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := j.RunOnce(ctx); err != nil && ctx.Err() == nil {
			j.o.Logger.Warn("retention: pass finished with failures", "err", err)
		}
		t.Reset(j.o.Interval)
	}
}

// Purged is what one pass did for one tenant.
type Purged struct {
	// Measured is how many finished invocations had their history size (re)measured.
	Measured int
	// Invocations, Rows and Bytes: finished invocations purged, the rows deleted with them
	// (invocation and event rows), and the history bytes released.
	Invocations, Rows, Bytes int64
	// Events and AuditEvents: published events and audit events deleted.
	Events, AuditEvents int64
	// ScheduleRuns: schedule runs and finished backfills' partitions deleted.
	ScheduleRuns int64
	// TriggerRows: event triggers' start records and hourly metrics rows deleted.
	TriggerRows int64
	// Workers: rows of workers not seen for WorkersKept deleted (cluster-wide: reported under the
	// platform tenant).
	Workers int64
	// HistoryBytes is the tenant's history size after the pass.
	HistoryBytes int64
}

func (p Purged) purgedAny() bool {
	return p.Invocations > 0 || p.Events > 0 || p.AuditEvents > 0 || p.ScheduleRuns > 0 || p.TriggerRows > 0 || p.Workers > 0
}

// RunOnce runs one pass over every tenant and returns what it did, by tenant id. A failed step of
// one tenant (a step, or its policy that does not decode) is logged with the tenant id and
// counted, and the pass goes on; the error returned joins every failure of the pass (nil if none).
// Only ctx ending stops the pass early. Every batch already committed stays done.
func (j *Job) RunOnce(ctx context.Context) (map[string]Purged, error) {
	now := j.o.Clock.Now()
	out := map[string]Purged{}
	var errs []error
	// A policy that does not decode costs its tenant this pass; the others are returned with it.
	policies, err := j.st.AllTenants(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return out, err
		}
		errs = append(errs, err)
		failures := []error{err}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			failures = joined.Unwrap()
		}
		for _, e := range failures {
			if te, ok := errors.AsType[*store.TenantError](e); ok {
				j.record(ctx, te.TenantID, "policy", te.Err)
				continue
			}
			j.o.Failed(JobName)
			j.o.Logger.Error("retention: reading tenant policies failed", "err", e)
		}
	}
	for _, p := range policies {
		if err := ctx.Err(); err != nil {
			return out, errors.Join(append(errs, err)...)
		}
		r, err := j.tenant(ctx, p, now)
		out[p.TenantID] = r
		if r.purgedAny() {
			j.o.Logger.Info("retention: purged", "tenant_id", p.TenantID, "invocations", r.Invocations, "rows", r.Rows,
				"bytes", r.Bytes, "events", r.Events, "audit_events", r.AuditEvents, "schedule_runs", r.ScheduleRuns, "trigger_rows", r.TriggerRows, "history_bytes", r.HistoryBytes)
		} else if r.Measured > 0 {
			j.o.Logger.Debug("retention: measured", "tenant_id", p.TenantID, "invocations", r.Measured, "history_bytes", r.HistoryBytes)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if p, err := j.platform(ctx, now); p.purgedAny() || err != nil {
		out[entrypoint.PlatformTenant] = p
		if err != nil {
			errs = append(errs, err)
		}
	}
	if j.o.Passed != nil && ctx.Err() == nil {
		var total Purged
		for _, r := range out {
			total.Measured += r.Measured
			total.Invocations += r.Invocations
			total.Rows += r.Rows
			total.Bytes += r.Bytes
			total.Events += r.Events
			total.AuditEvents += r.AuditEvents
			total.ScheduleRuns += r.ScheduleRuns
			total.TriggerRows += r.TriggerRows
			total.Workers += r.Workers
			total.HistoryBytes += r.HistoryBytes
		}
		j.o.Passed(len(errs) == 0, total)
	}
	return out, errors.Join(errs...)
}

// platform runs the pass's cluster-wide steps, reported under the platform tenant: its audit
// events older than PlatformAuditDays, and the workers not seen for WorkersKept.
func (j *Job) platform(ctx context.Context, now time.Time) (Purged, error) {
	var r Purged
	var errs []error
	var err error
	r.AuditEvents, err = j.purgeAudit(ctx, entrypoint.PlatformTenant, now.Add(-days(j.o.PlatformAuditDays)))
	if err != nil {
		errs = append(errs, j.failed(ctx, entrypoint.PlatformTenant, "audit", err))
	}
	r.Workers, err = j.batches(ctx, func(tx store.Tx) (int64, error) { return tx.PurgeWorkers(now.Add(-WorkersKept), j.o.BatchRows) })
	if err != nil {
		errs = append(errs, j.failed(ctx, entrypoint.PlatformTenant, "workers", err))
	}
	if r.purgedAny() {
		j.o.Logger.Info("retention: purged", "tenant_id", entrypoint.PlatformTenant, "audit_events", r.AuditEvents, "workers", r.Workers)
	}
	return r, errors.Join(errs...)
}

// failed logs and counts a failed step of a tenant's pass and returns err naming them. A step cut
// short because ctx ended is not a failure.
func (j *Job) failed(ctx context.Context, tenantID, step string, err error) error {
	j.record(ctx, tenantID, step, err)
	return fmt.Errorf("tenant %s: %s: %w", tenantID, step, err)
}

// record logs and counts a failed step of a tenant's pass (not one cut short by ctx ending).
func (j *Job) record(ctx context.Context, tenantID, step string, err error) {
	if ctx.Err() == nil {
		j.o.Failed(JobName)
		j.o.Logger.Error("retention: tenant failed", "tenant_id", tenantID, "step", step, "err", err)
	}
}

func days(n int64) time.Duration { return time.Duration(n) * 24 * time.Hour }

// tenant runs the pass for one tenant: mark for measuring again what runs again, measure what
// finished since the last pass, purge history by age and size, then published events and audit
// events by age. A failed step is logged and counted and the next step runs; the error joins the
// failures.
func (j *Job) tenant(ctx context.Context, p tenant.Policy, now time.Time) (Purged, error) {
	var r Purged
	id := p.TenantID
	var errs []error
	step := func(name string, fn func() error) {
		if ctx.Err() != nil {
			return
		}
		if err := fn(); err != nil {
			errs = append(errs, j.failed(ctx, id, name, err))
		}
	}
	step("reopen", func() error {
		_, err := j.batches(ctx, func(tx store.Tx) (int64, error) { return tx.ReopenHistory(id, j.o.BatchRows) })
		return err
	})
	step("measure", func() (err error) {
		r.Measured, err = j.measure(ctx, id)
		return err
	})
	if hd := p.Retention.ExecutionHistoryDays; hd > 0 || p.Quotas.MaxExecutionHistoryMB != nil {
		q := store.HistoryPurge{MaxRows: j.o.BatchRows}
		if hd > 0 {
			q.FinishedBefore = now.Add(-days(hd))
		}
		if c := p.Quotas.MaxExecutionHistoryMB; c != nil && *c > 0 {
			q.CapBytes = *c * MB
		}
		step("history", func() error {
			for more := true; more; {
				if err := ctx.Err(); err != nil {
					return err
				}
				var b store.HistoryPurged
				if err := j.st.Update(ctx, func(tx store.Tx) error {
					var err error
					b, err = tx.PurgeHistory(id, q)
					return err
				}); err != nil {
					return err
				}
				r.Invocations += b.Invocations
				r.Rows += b.Rows
				r.Bytes += b.Bytes
				more = b.More
			}
			return nil
		})
	}
	if hd := p.Retention.ExecutionHistoryDays; hd > 0 {
		before := now.Add(-days(hd))
		step("events", func() (err error) {
			r.Events, err = j.batches(ctx, func(tx store.Tx) (int64, error) { return tx.PurgeEvents(id, before, j.o.BatchRows) })
			return err
		})
		step("schedule_runs", func() (err error) {
			r.ScheduleRuns, err = j.batches(ctx, func(tx store.Tx) (int64, error) { return tx.PurgeScheduleRuns(id, before, j.o.BatchRows) })
			return err
		})
		step("trigger_history", func() (err error) {
			q := store.TriggerHistoryPurge{TenantID: id, StartsBefore: before, MetricsBefore: now.Add(-TriggerMetricsKept), Limit: j.o.BatchRows}
			r.TriggerRows, err = j.batches(ctx, func(tx store.Tx) (int64, error) { return tx.PurgeTriggerHistory(q) })
			return err
		})
	}
	if ad := p.Retention.AuditLogDays; ad > 0 {
		step("audit", func() (err error) {
			r.AuditEvents, err = j.purgeAudit(ctx, id, now.Add(-days(ad)))
			return err
		})
	}
	step("history_bytes", func() (err error) {
		r.HistoryBytes, err = j.st.TenantHistoryBytes(ctx, id)
		return err
	})
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return r, errors.Join(errs...)
}

// measure records the history size of the tenant's invocations that finished (or changed) since
// the last pass.
func (j *Job) measure(ctx context.Context, tenantID string) (int, error) {
	total := 0
	for {
		sizes, err := j.st.MeasureHistory(ctx, tenantID, measureBatch)
		if err != nil || len(sizes) == 0 {
			return total, err
		}
		var n int
		if err := j.st.Update(ctx, func(tx store.Tx) error {
			var err error
			n, err = tx.RecordHistory(tenantID, sizes)
			return err
		}); err != nil {
			return total, err
		}
		total += n
		// Measurements not stored were of invocations that changed meanwhile: the next pass takes
		// them. Stop here rather than chase invocations that keep changing.
		if len(sizes) < measureBatch || n < len(sizes) {
			return total, nil
		}
	}
}

func (j *Job) purgeAudit(ctx context.Context, tenantID string, before time.Time) (int64, error) {
	return j.batches(ctx, func(tx store.Tx) (int64, error) { return tx.PurgeAudit(tenantID, before, j.o.BatchRows) })
}

// batches runs one bounded delete per transaction until a batch deletes less than the bound.
func (j *Job) batches(ctx context.Context, del func(store.Tx) (int64, error)) (int64, error) {
	var total int64
	for {
		var n int64
		if err := j.st.Update(ctx, func(tx store.Tx) error {
			var err error
			n, err = del(tx)
			return err
		}); err != nil {
			return total, err
		}
		total += n
		if n < int64(j.o.BatchRows) {
			return total, nil
		}
	}
}
