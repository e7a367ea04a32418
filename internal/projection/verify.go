package projection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Options select what Verify and Rebuild look at.
type Options struct {
	// TenantID restricts the run to one tenant ("" = every tenant).
	TenantID string
	// Since restricts the run to invocations updated at or after it and to the usage hours from it
	// on, rounded down to the hour (zero: all of them).
	Since time.Time
	// Now is the current time (zero: time.Now()): the end of the usage window and the reference of
	// the tenants' retention windows.
	Now time.Time
	// PageSize is the invocations read per page and the events per read of a log (<= 0: 200).
	PageSize int
}

// Summary counts what a run did.
type Summary struct {
	// Invocations and UsageRows count the projections compared (aggregates: per hour and entrypoint
	// version, stored or recomputed).
	Invocations, UsageRows int64
	// Diffs counts the differences reported.
	Diffs int64
	// Unreplayable counts the invocations whose log could not be replayed (a gap, an event the
	// status machine refuses): reported with field "log", never rebuilt.
	Unreplayable int64
	// RebuiltInvocations and RebuiltUsageHours count what Rebuild rewrote (tenant hours: every
	// aggregate of a tenant's hour is rewritten at once).
	RebuiltInvocations, RebuiltUsageHours int64
	// SkippedUsageTenants lists the tenants whose usage Rebuild left alone because one of their logs
	// could not be replayed.
	SkippedUsageTenants []string
}

// Store is the store methods Verify and Rebuild use (store.Store has them all): the stored
// projections and logs, the tenants' policies (their retention windows), the usage aggregates, the
// projection lock, and Update for Rebuild's rewrites.
type Store interface {
	store.ProjectionReader
	store.ProjectionLocker
	store.TenantReader
	store.UsageReader
	AllTenants(ctx context.Context) ([]tenant.Policy, error)
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Verify recomputes every selected projection from its event log and calls report with each
// difference, in order of tenant, then invocation id, then usage hour and entrypoint. It changes
// nothing. report's error stops the run.
//
// The usage window of a tenant starts at Since, and no earlier than the tenant's retention window
// (retention.execution_history_days before Now, rounded up to the hour): the retention job purges
// older invocations with their logs but not the aggregates they added to, so older hours cannot be
// recomputed. A tenant whose history the size cap (quotas.max_execution_history_mb) purged has the
// same gap inside its window: verify such a tenant with a Since after the purged history.
func Verify(ctx context.Context, st Store, o Options, report func(Diff) error) (Summary, error) {
	w := walker{st: st, o: o.normal(), report: report}
	err := w.run(ctx)
	return w.sum, err
}

// Rebuild is Verify, then it rewrites each differing projection from the log, each in its own
// transaction: an invocation's projection under its row lock (see store.ProjectionTx), a tenant's
// hour of usage aggregates with the aggregates locked against other writers. Projections whose
// log cannot be replayed are left as they are. It takes the store's projection lock for the run
// (store.ProjectionLocker), so two rebuilds never overlap.
func Rebuild(ctx context.Context, st Store, o Options, report func(Diff) error) (Summary, error) {
	release, err := st.LockProjections(ctx)
	if err != nil {
		return Summary{}, err
	}
	w := walker{st: st, o: o.normal(), report: report, rebuild: true}
	err = w.run(ctx)
	if rerr := release(); err == nil {
		err = rerr
	}
	return w.sum, err
}

func (o Options) normal() Options {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.PageSize <= 0 {
		o.PageSize = 200
	}
	if !o.Since.IsZero() {
		o.Since = invocation.UsageHour(o.Since)
	}
	return o
}

// walker is one run over the invocations, tenant by tenant.
type walker struct {
	st      Store
	o       Options
	report  func(Diff) error
	rebuild bool
	sum     Summary

	policies map[string]int64 // tenant → retention.execution_history_days, for tenants with a policy

	// The tenant being walked.
	tenant       string
	from, to     time.Time // its usage window
	usage        map[usageKey]*invocation.Usage
	unreplayable bool
}

func (w *walker) run(ctx context.Context) error {
	tenants, err := w.tenants(ctx)
	if err != nil {
		return err
	}
	for _, id := range tenants {
		w.startTenant(id)
		q := store.StoredInvocationQuery{TenantID: id, UpdatedSince: w.o.Since, Limit: w.o.PageSize}
		for {
			page, err := w.st.StoredInvocations(ctx, q)
			if err != nil {
				return err
			}
			for _, si := range page {
				if err := w.invocation(ctx, si); err != nil {
					return err
				}
			}
			if len(page) < q.Limit {
				break
			}
			q.After = page[len(page)-1].Cursor
		}
		if err := w.endTenant(ctx); err != nil {
			return err
		}
	}
	return nil
}

// tenants lists the tenants of the run, sorted, and reads their retention: those with invocations
// and those with a policy (whose stored aggregates must then match the logs too, even without any
// invocation left).
func (w *walker) tenants(ctx context.Context) ([]string, error) {
	w.policies = map[string]int64{}
	if w.o.TenantID != "" {
		p, err := w.st.Tenant(ctx, w.o.TenantID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			w.policies[p.TenantID] = p.Retention.ExecutionHistoryDays
		}
		return []string{w.o.TenantID}, nil
	}
	all, err := w.st.AllTenants(ctx)
	if err != nil {
		// A policy that does not decode: its tenant's retention is unknown, so its usage window is
		// not limited by it; the run goes on.
		var te *store.TenantError
		if !errors.As(err, &te) {
			return nil, err
		}
	}
	for _, p := range all {
		w.policies[p.TenantID] = p.Retention.ExecutionHistoryDays
	}
	ids, err := w.st.InvocationTenants(ctx)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	for id := range w.policies {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func (w *walker) startTenant(id string) {
	w.tenant, w.usage, w.unreplayable = id, map[usageKey]*invocation.Usage{}, false
	w.to = invocation.UsageHour(w.o.Now).Add(time.Hour)
	w.from = time.Unix(0, 0).UTC()
	if !w.o.Since.IsZero() && w.o.Since.After(w.from) {
		w.from = w.o.Since
	}
	if days := w.policies[id]; days > 0 {
		// Purged invocations finished before Now - days; their events lie in that hour or earlier.
		if h := invocation.UsageHour(w.o.Now.Add(-time.Duration(days) * 24 * time.Hour)).Add(time.Hour); h.After(w.from) {
			w.from = h
		}
	}
	if w.from.After(w.to) {
		w.from = w.to
	}
}

func (w *walker) emit(d Diff) error {
	w.sum.Diffs++
	if w.report == nil {
		return nil
	}
	return w.report(d)
}

// invocation compares one invocation's projection with its log and adds its usage to the tenant's.
// A difference seen outside a transaction is confirmed under the row lock (confirmInvocation).
func (w *walker) invocation(ctx context.Context, si store.StoredInvocation) error {
	w.sum.Invocations++
	f, replay, err := w.foldLog(ctx, si)
	if err != nil {
		return err
	}
	if replay != nil {
		return w.cannotReplay(si, "", replay.Error())
	}
	if f.Record.LastSeq == 0 {
		return w.cannotReplay(si, "", "the log is empty")
	}
	if err := shorterLog(si, f.Record); err != nil {
		return w.cannotReplay(si, fmt.Sprintf("last_seq %d", si.LastSeq), err.Error())
	}
	f.mergeInto(w.usage)
	consumed, err := w.st.EventConsumptions(ctx, si.TenantID, si.ID)
	if err != nil {
		return err
	}
	if len(CompareInvocation(si, withOwner(f.Record, si.EntrypointOwner))) == 0 &&
		len(CompareConsumptions(si.TenantID, si.ID, consumed, f.Consumed())) == 0 {
		return nil
	}
	return w.confirmInvocation(ctx, si)
}

// foldLog reads an invocation's log page by page and folds it over the tenant's usage window.
// replay is why the log cannot be replayed (a gap, an event that does not apply); err is any other
// failure.
func (w *walker) foldLog(ctx context.Context, si store.StoredInvocation) (f *Fold, replay, err error) {
	f = &Fold{From: w.from, To: w.to}
	var after int64
	for {
		events, err := w.st.InvocationLog(ctx, store.EventLogQuery{TenantID: si.TenantID, InvocationID: si.ID, AfterSeq: after, Limit: w.o.PageSize})
		if err == nil {
			for _, e := range events {
				if err = f.Apply(e); err != nil {
					break
				}
			}
		}
		if err != nil {
			var gap *store.GapError
			var ae *applyError
			if !errors.As(err, &gap) && !errors.As(err, &ae) {
				return nil, nil, err
			}
			return nil, err, nil
		}
		if len(events) < w.o.PageSize {
			return f, nil, nil
		}
		after = events[len(events)-1].Seq
	}
}

// cannotReplay counts an invocation whose log cannot be replayed, marks its tenant's usage as not
// recomputable and reports it (field "log"; reason says why, stored what the projection holds).
func (w *walker) cannotReplay(si store.StoredInvocation, stored, reason string) error {
	w.sum.Unreplayable++
	w.unreplayable = true
	return w.emit(Diff{Kind: KindInvocation, TenantID: si.TenantID, InvocationID: si.ID, Field: "log",
		Stored: stored, Recomputed: "cannot replay: " + reason})
}

// confirmInvocation compares the invocation again inside one transaction, rewrites it there when
// rebuilding, and reports what still differs.
func (w *walker) confirmInvocation(ctx context.Context, si store.StoredInvocation) error {
	// The projection and the log were read at different moments: confirm under the row lock, where
	// no append can come between the two reads (and rewrite there when rebuilding).
	var diffs []Diff
	var replay error
	err := w.st.Update(ctx, func(tx store.Tx) error {
		var err error
		diffs, replay, err = checkInvocation(tx, si.TenantID, si.ID, w.rebuild)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // purged meanwhile
	}
	if err != nil {
		return fmt.Errorf("invocation %s: %w", si.ID, err)
	}
	if replay != nil {
		return w.cannotReplay(si, "", replay.Error())
	}
	for _, d := range diffs {
		if err := w.emit(d); err != nil {
			return err
		}
	}
	if w.rebuild && len(diffs) > 0 {
		w.sum.RebuiltInvocations++
	}
	return nil
}

// endTenant compares the tenant's recomputed usage with the stored aggregates of its window:
// differences first seen without a lock are confirmed hour by hour (confirmUsageHours), unless one
// of the tenant's logs could not be replayed.
func (w *walker) endTenant(ctx context.Context) error {
	stored, err := w.storedUsage(ctx)
	if err != nil {
		return err
	}
	fast, hours := w.diffUsage(stored, usageKeys(stored, w.usage))
	if w.unreplayable {
		// One of the tenant's logs cannot be replayed: its share is unknown, so the differences
		// are reported as they are and nothing is rewritten.
		if w.rebuild && len(hours) > 0 {
			w.sum.SkippedUsageTenants = append(w.sum.SkippedUsageTenants, w.tenant)
		}
		for _, d := range fast {
			if err := w.emit(d); err != nil {
				return err
			}
		}
		return nil
	}
	return w.confirmUsageHours(ctx, hours)
}

// storedUsage reads the tenant's stored hourly aggregates of its usage window (none for an empty
// window).
func (w *walker) storedUsage(ctx context.Context) (map[usageKey]invocation.Usage, error) {
	stored := map[usageKey]invocation.Usage{}
	if w.from.Before(w.to) {
		rows, err := w.st.UsageHistory(ctx, w.tenant, store.UsageQuery{From: w.from, To: w.to, Width: time.Hour})
		if err != nil {
			return nil, fmt.Errorf("usage of tenant %s: %w", w.tenant, err)
		}
		for _, r := range rows {
			stored[usageKey{hour: r.Start.Unix(), entrypointID: r.EntrypointID}] = r.Usage
		}
	}
	return stored, nil
}

// usageKeys lists the keys of the stored and the recomputed aggregates, once each, in order of hour
// and then entrypoint.
func usageKeys(stored map[usageKey]invocation.Usage, recomputed map[usageKey]*invocation.Usage) []usageKey {
	keys := make([]usageKey, 0, len(stored)+len(recomputed))
	for k := range stored {
		keys = append(keys, k)
	}
	for k := range recomputed {
		if _, ok := stored[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b usageKey) int {
		if a.hour != b.hour {
			return int(a.hour - b.hour)
		}
		if a.entrypointID < b.entrypointID {
			return -1
		}
		if a.entrypointID > b.entrypointID {
			return 1
		}
		return 0
	})
	return keys
}

// diffUsage compares the stored and the recomputed aggregate of each key, counting the rows
// compared. It returns the differences and the hours that have any, ascending.
func (w *walker) diffUsage(stored map[usageKey]invocation.Usage, keys []usageKey) (fast []Diff, hours []int64) {
	for _, k := range keys {
		w.sum.UsageRows++
		var rec invocation.Usage
		if u := w.usage[k]; u != nil {
			rec = *u
		}
		diffs := CompareUsage(w.tenant, time.Unix(k.hour, 0).UTC(), k.entrypointID, stored[k], rec)
		fast = append(fast, diffs...)
		if len(diffs) > 0 && (len(hours) == 0 || hours[len(hours)-1] != k.hour) {
			hours = append(hours, k.hour)
		}
	}
	return fast, hours
}

// confirmUsageHours checks each differing hour again in its own transaction, rewrites it there when
// rebuilding, and reports what still differs.
func (w *walker) confirmUsageHours(ctx context.Context, hours []int64) error {
	// Confirm each differing hour with the aggregates locked (appends to it wait), where the logs and
	// the aggregates are read at one moment, and rewrite it there when rebuilding.
	for _, h := range hours {
		hour := time.Unix(h, 0).UTC()
		var diffs []Diff
		err := w.st.Update(ctx, func(tx store.Tx) error {
			var err error
			diffs, err = checkUsageHour(tx, w.tenant, hour, w.rebuild)
			return err
		})
		if err != nil {
			return fmt.Errorf("usage of tenant %s at %s: %w", w.tenant, hour.Format(time.RFC3339), err)
		}
		for _, d := range diffs {
			if err := w.emit(d); err != nil {
				return err
			}
		}
		if w.rebuild && len(diffs) > 0 {
			w.sum.RebuiltUsageHours++
		}
	}
	return nil
}

// applyError wraps an error of invocation.Apply met while replaying a log.
type applyError struct{ err error }

func (e *applyError) Error() string { return e.err.Error() }
func (e *applyError) Unwrap() error { return e.err }

// shorterLog refuses a log that ends before the seq the stored projection has reached: its tail may
// be lost (a restore, a hand delete), and rewinding the projection to what is left would undo
// work the invocation did. An operator decides; the tool does not.
func shorterLog(si store.StoredInvocation, replayed invocation.Record) error {
	if replayed.LastSeq < si.LastSeq {
		return fmt.Errorf("the log ends at seq %d but the projection has reached seq %d: events may be missing", replayed.LastSeq, si.LastSeq)
	}
	return nil
}

// checkInvocation compares one invocation's projections (its record and columns, its consumed
// events) with its log inside tx, with its row locked, and rewrites those that differ when fix is
// set. replay is the reason the log cannot be replayed (nothing is compared then). The row lock
// covers the consumed events too: a wait consumes an event in the transaction that appends its
// resolution to the invocation.
func checkInvocation(tx store.Tx, tenantID, id string, fix bool) (diffs []Diff, replay, err error) {
	si, err := tx.LockInvocation(tenantID, id)
	if err != nil {
		return nil, nil, err
	}
	events, err := tx.InvocationLog(id, 0)
	var gap *store.GapError
	if errors.As(err, &gap) {
		return nil, err, nil
	}
	if err != nil {
		return nil, nil, err
	}
	want, err := Expected(events, si.EntrypointOwner)
	if err != nil {
		return nil, err, nil
	}
	if err := shorterLog(si, want); err != nil {
		return nil, err, nil
	}
	diffs = CompareInvocation(si, want)
	if fix && len(diffs) > 0 {
		if err := tx.RewriteInvocation(want); err != nil {
			return nil, nil, err
		}
	}
	stored, err := tx.EventConsumptions(tenantID, id)
	if err != nil {
		return nil, nil, err
	}
	consumed := Consumed(events)
	cdiffs := CompareConsumptions(tenantID, id, stored, consumed)
	if fix && len(cdiffs) > 0 {
		if err := tx.ReplaceEventConsumptions(tenantID, id, consumed); err != nil {
			return nil, nil, err
		}
	}
	return append(diffs, cdiffs...), nil, nil
}

// checkUsageHour recomputes one tenant's aggregates of one hour from the logs of the invocations
// that may have events in it, with the aggregates locked, compares them with the stored ones and,
// when fix is set and they differ, replaces the stored ones.
func checkUsageHour(tx store.Tx, tenantID string, hour time.Time, fix bool) ([]Diff, error) {
	if err := tx.LockUsage(); err != nil {
		return nil, err
	}
	end := hour.Add(time.Hour)
	ids, err := tx.UsageInvocations(tenantID, hour, end)
	if err != nil {
		return nil, err
	}
	agg := map[string]invocation.Usage{}
	for _, id := range ids {
		events, err := tx.InvocationLog(id, 0)
		if err != nil {
			return nil, err
		}
		f := Fold{From: hour, To: end}
		for _, e := range events {
			if err := f.Apply(e); err != nil {
				return nil, fmt.Errorf("invocation %s: %w", id, err)
			}
		}
		for k, u := range f.usage {
			x := agg[k.entrypointID]
			x.Add(*u)
			agg[k.entrypointID] = x
		}
	}
	stored, err := tx.UsageRows(tenantID, hour)
	if err != nil {
		return nil, err
	}
	got := map[string]invocation.Usage{}
	for _, r := range stored {
		got[r.EntrypointID] = r.Usage
	}
	eps := make([]string, 0, len(agg)+len(got))
	for ep := range agg {
		eps = append(eps, ep)
	}
	for ep := range got {
		if _, ok := agg[ep]; !ok {
			eps = append(eps, ep)
		}
	}
	slices.Sort(eps)
	var diffs []Diff
	rows := make([]store.UsageRow, 0, len(agg))
	for _, ep := range eps {
		diffs = append(diffs, CompareUsage(tenantID, hour, ep, got[ep], agg[ep])...)
		if u, ok := agg[ep]; ok {
			rows = append(rows, store.UsageRow{Start: hour, EntrypointID: ep, Usage: u})
		}
	}
	if fix && len(diffs) > 0 {
		if err := tx.ReplaceUsage(tenantID, hour, rows); err != nil {
			return nil, err
		}
	}
	return diffs, nil
}
