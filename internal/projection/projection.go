// Package projection verifies and rebuilds the projections of the invocation event log (003: the
// record is a projection of the log and can be rebuilt from it; 004 §20).
//
// Three projections are stored beside the log: each invocation's record (the invocations row: the
// record JSON and the columns lists and filters read), the usage aggregates (usage_hourly, per
// tenant, hour and entrypoint version), and each invocation's consumed events (event_consumptions:
// the published events that satisfied its waits, one per journal_resolved event carrying an
// event_seq). The timeline is not one: it is read from the log itself. All are written by the
// store in the transaction that appends the events; the first two with the same pure functions
// this package replays: invocation.Apply folds an event into the record and invocation.UsageOf is
// what it adds to the aggregates. Verify recomputes them from the log and reports every
// difference; Rebuild rewrites what differs.
//
// Verify streams: it reads invocations a page at a time and each log a page at a time, and keeps in
// memory one page, one record and one tenant's recomputed usage over the window it checks.
package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// Kinds of projection a Diff is about.
const (
	// KindInvocation is an invocation's record and its columns.
	KindInvocation = "invocation"
	// KindUsage is a usage aggregate (tenant, hour, entrypoint version).
	KindUsage = "usage"
)

// Diff is one difference between a stored projection and what its event log gives.
type Diff struct {
	Kind     string
	TenantID string
	// InvocationID names the invocation (KindInvocation).
	InvocationID string
	// Hour and EntrypointID name the aggregate (KindUsage).
	Hour         time.Time
	EntrypointID string
	// Field is the record member (its JSON name), "column <name>" for a column that copies one, or
	// the usage figure; "log" when the log itself cannot be replayed (nothing to compare with: the
	// projection cannot be rebuilt either).
	Field      string
	Stored     string
	Recomputed string
}

// String is the diff on one line.
func (d Diff) String() string {
	where := "invocation " + d.InvocationID
	if d.Kind == KindUsage {
		where = fmt.Sprintf("usage %s %s %s", d.TenantID, d.Hour.UTC().Format("2006-01-02T15Z"), d.EntrypointID)
	}
	return fmt.Sprintf("%s: %s: stored %s, recomputed %s", where, d.Field, d.Stored, d.Recomputed)
}

// Expected is the projection the log gives: Rebuild(events), with the one member the log of an old
// invocation may lack. entrypoint_owner was added to the record after invocations had been logged;
// the migration that added it set it on the stored record and column only, so an owner the log
// does not carry is kept from the stored projection.
func Expected(events []invocation.Event, storedOwner string) (invocation.Record, error) {
	r, err := invocation.Rebuild(events)
	if err != nil {
		return r, err
	}
	return withOwner(r, storedOwner), nil
}

func withOwner(r invocation.Record, storedOwner string) invocation.Record {
	if r.EntrypointOwner == "" {
		r.EntrypointOwner = storedOwner
	}
	return r
}

// storedTime is t as the stores keep times: UTC, to the microsecond.
func storedTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// CompareInvocation lists the differences between a stored projection and the record its log
// gives (want), field by field.
func CompareInvocation(si store.StoredInvocation, want invocation.Record) []Diff {
	diff := func(field, stored, recomputed string) Diff {
		return Diff{Kind: KindInvocation, TenantID: si.TenantID, InvocationID: si.ID, Field: field, Stored: stored, Recomputed: recomputed}
	}
	var out []Diff
	var got invocation.Record
	if err := json.Unmarshal(si.Record, &got); err != nil {
		out = append(out, diff("record", "undecodable: "+err.Error(), "a record"))
	} else {
		// The columns are the stored last_seq and updated_at (the record JSON's copies lag behind
		// informational appends by design), as the stores read them.
		got.LastSeq, got.UpdatedAt = si.LastSeq, si.UpdatedAt
		out = append(out, compareJSON(got, want, diff)...)
	}
	cols := []struct{ name, stored, want string }{
		{"status", string(si.Status), string(want.Status)},
		{"tenant_id", si.TenantID, want.TenantID},
		{"entrypoint_ref", si.EntrypointRef, want.EntrypointRef},
		{"entrypoint_id", si.EntrypointID, want.EntrypointID},
		{"mode", string(si.Mode), string(want.Mode)},
		{"correlation_id", si.CorrelationID, want.CorrelationID},
		{"subject_id", si.SubjectID, want.SubjectID},
		{"entrypoint_owner", si.EntrypointOwner, want.EntrypointOwner},
		{"created_at", timeText(si.CreatedAt), timeText(storedTime(want.CreatedAt))},
	}
	for _, c := range cols {
		if c.stored != c.want {
			out = append(out, diff("column "+c.name, quote(c.stored), quote(c.want)))
		}
	}
	return out
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "(none)"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// compareJSON compares two records member by member in their stored JSON form.
func compareJSON(got, want invocation.Record, diff func(field, stored, recomputed string) Diff) []Diff {
	g, gerr := members(got)
	w, werr := members(want)
	if gerr != nil || werr != nil {
		return []Diff{diff("record", fmt.Sprint(gerr), fmt.Sprint(werr))}
	}
	keys := make([]string, 0, len(g)+len(w))
	for k := range g {
		keys = append(keys, k)
	}
	for k := range w {
		if _, ok := g[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Diff
	for _, k := range keys {
		if !sameJSON(g[k], w[k]) {
			out = append(out, diff(k, text(g[k]), text(w[k])))
		}
	}
	return out
}

// sameJSON reports whether a and b are the same JSON value: equal bytes, or equal once decoded
// (a record rewritten by a database's JSON functions may order an object's members differently).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	var x, y any
	if invocation.DecodeJSON(a, &x) != nil || invocation.DecodeJSON(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func text(b []byte) string {
	if b == nil {
		return "(absent)"
	}
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// members is r's JSON as its top-level members, each compacted.
func members(r invocation.Record) (map[string][]byte, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return nil, err
		}
		out[k] = b.Bytes()
	}
	return out, nil
}

// FieldConsumptions is the Field of a Diff about an invocation's consumed events: the published
// events that satisfied its waits (event_consumptions), a projection of the journal_resolved events
// that carry an event_seq.
const FieldConsumptions = "event_consumptions"

// consumedSeq is the seq of the published event e delivered to a wait, or 0 when e delivered none.
func consumedSeq(e invocation.Event) int64 {
	if e.Type != invocation.EventJournalResolved {
		return 0
	}
	d, err := invocation.DecodeData[invocation.JournalResolved](e)
	if err != nil {
		return 0
	}
	return d.EventSeq
}

// Consumed lists the seqs of the published events a log's waits consumed, ascending, each once.
func Consumed(events []invocation.Event) []int64 {
	var out []int64
	for _, e := range events {
		if seq := consumedSeq(e); seq > 0 {
			out = append(out, seq)
		}
	}
	return ascendingSet(out)
}

// ascendingSet is seqs sorted, each once, in a slice of its own.
func ascendingSet(seqs []int64) []int64 {
	out := slices.Clone(seqs)
	slices.Sort(out)
	return slices.Compact(out)
}

// CompareConsumptions is the difference, if any, between an invocation's stored consumed events
// and those its log gives (both ascending).
func CompareConsumptions(tenantID, id string, stored, want []int64) []Diff {
	if slices.Equal(stored, want) {
		return nil
	}
	return []Diff{{Kind: KindInvocation, TenantID: tenantID, InvocationID: id, Field: FieldConsumptions,
		Stored: fmt.Sprint(orNone(stored)), Recomputed: fmt.Sprint(orNone(want))}}
}

func orNone(seqs []int64) any {
	if len(seqs) == 0 {
		return "(none)"
	}
	return seqs
}

// usageKey is one usage aggregate.
type usageKey struct {
	hour         int64 // UsageHour as Unix seconds
	entrypointID string
}

// Fold replays one invocation's log event by event: the record (invocation.Apply) and what each
// event adds to the usage aggregates of the hours in [From, To) (invocation.UsageOf), the two
// functions the stores' write path runs.
type Fold struct {
	From, To time.Time
	Record   invocation.Record
	usage    map[usageKey]*invocation.Usage
	consumed []int64
}

// Apply folds e. An event that does not apply (invocation.Apply's error, wrapped) means the log
// cannot be replayed.
func (f *Fold) Apply(e invocation.Event) error {
	next, err := invocation.Apply(f.Record, e)
	if err != nil {
		return &applyError{err}
	}
	if !e.At.Before(f.From) && e.At.Before(f.To) {
		if u := invocation.UsageOf(f.Record, e, next); !u.IsZero() {
			if f.usage == nil {
				f.usage = map[usageKey]*invocation.Usage{}
			}
			k := usageKey{hour: invocation.UsageHour(e.At).Unix(), entrypointID: next.EntrypointID}
			if f.usage[k] == nil {
				f.usage[k] = &invocation.Usage{}
			}
			f.usage[k].Add(u)
		}
	}
	if seq := consumedSeq(e); seq > 0 {
		f.consumed = append(f.consumed, seq)
	}
	f.Record = next
	return nil
}

// Consumed lists the seqs of the published events the folded events consumed (see Consumed).
func (f *Fold) Consumed() []int64 { return ascendingSet(f.consumed) }

// mergeInto adds the fold's usage to m.
func (f *Fold) mergeInto(m map[usageKey]*invocation.Usage) {
	for k, u := range f.usage {
		if m[k] == nil {
			m[k] = &invocation.Usage{}
		}
		m[k].Add(*u)
	}
}

// usageFields are the figures of an aggregate, in the order reported.
func usageFields(u invocation.Usage) []struct {
	name string
	n    int64
} {
	return []struct {
		name string
		n    int64
	}{
		{"invocations", u.Invocations}, {"succeeded", u.Succeeded}, {"failed", u.Failed}, {"canceled", u.Canceled},
		{"dead_lettered", u.DeadLettered}, {"compensated", u.Compensated}, {"executions", u.Executions},
		{"duration_ms", u.DurationMS}, {"billed_duration_ms", u.BilledDurationMS}, {"cpu_time_ms", u.CPUTimeMS},
		{"memory_mb_ms", u.MemoryMBMS}, {"egress_bytes", u.EgressBytes},
	}
}

// CompareUsage lists the figures in which a stored aggregate differs from the recomputed one. Costs
// are sums of floats added in another order on the write path, so they compare with a relative
// tolerance of 1e-9.
func CompareUsage(tenantID string, hour time.Time, entrypointID string, stored, recomputed invocation.Usage) []Diff {
	var out []Diff
	sf, rf := usageFields(stored), usageFields(recomputed)
	for i := range sf {
		if sf[i].n != rf[i].n {
			out = append(out, Diff{Kind: KindUsage, TenantID: tenantID, Hour: hour, EntrypointID: entrypointID,
				Field: sf[i].name, Stored: fmt.Sprint(sf[i].n), Recomputed: fmt.Sprint(rf[i].n)})
		}
	}
	if !closeEnough(stored.Cost, recomputed.Cost) {
		out = append(out, Diff{Kind: KindUsage, TenantID: tenantID, Hour: hour, EntrypointID: entrypointID,
			Field: "cost", Stored: fmt.Sprint(stored.Cost), Recomputed: fmt.Sprint(recomputed.Cost)})
	}
	return out
}

func closeEnough(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
