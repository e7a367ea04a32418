// Package usage answers 000's Quota Usage API: a tenant's current usage against its quotas, and its
// usage history (invocations, how they finished, the resources their executions consumed and what
// that cost) in hourly, daily or weekly buckets with a per-entrypoint breakdown.
//
// It only reads. The history comes from the hourly aggregates the store keeps as a projection of
// the invocation event log (store.Reader.UsageHistory; what is counted is invocation.UsageOf); no
// request reads invocations or their events.
package usage

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Store is what the service reads (store.Store has it all).
type Store interface {
	CountTenantRunning(ctx context.Context, tenantID string) (int64, error)
	CountTenantEntrypoints(ctx context.Context, tenantID string) (int64, error)
	CountTenantSchedules(ctx context.Context, tenantID string) (int64, error)
	CountTenantWebhookTriggers(ctx context.Context, tenantID string) (int64, error)
	CountTenantTriggers(ctx context.Context, tenantID string) (int64, error)
	TenantHistoryBytes(ctx context.Context, tenantID string) (int64, error)
	UsageHistory(ctx context.Context, tenantID string, q store.UsageQuery) ([]store.UsageRow, error)
}

// Policies authorizes a read of a tenant's governance data and returns its policy (tenancy.Service):
// the platform operator reads any tenant, a tenant admin its own; another tenant's, or one that was
// never enabled, is 404.
type Policies interface {
	Policy(ctx context.Context, sc auth.SecurityContext, tenantID string) (tenant.Policy, error)
}

// Service answers usage requests.
type Service struct {
	store    Store
	policies Policies
	clock    clock.Clock
	currency string
}

// NewService returns a Service; currency names the pricing currency of the costs it reports.
func NewService(s Store, p Policies, c clock.Clock, currency string) *Service {
	return &Service{store: s, policies: p, clock: c, currency: currency}
}

// Report is 000's Usage Response.
type Report struct {
	TenantID           string      `json:"tenant_id"`
	Timestamp          time.Time   `json:"timestamp"`
	Current            Current     `json:"current"`
	Quotas             Quotas      `json:"quotas"`
	UtilizationPercent Utilization `json:"utilization_percent"`
}

// Current is 000's UsageMetrics.
type Current struct {
	// ConcurrentExecutions counts the tenant's running invocations.
	ConcurrentExecutions int64 `json:"concurrent_executions"`
	// TotalDefinitions counts the tenant's entrypoints that are not archived (as max_definitions does).
	TotalDefinitions int64 `json:"total_definitions"`
	// TotalSchedules counts the tenant's schedules; TotalTriggers its triggers: event triggers and
	// webhook triggers (both take quotas.max_triggers).
	TotalSchedules int64 `json:"total_schedules"`
	TotalTriggers  int64 `json:"total_triggers"`
	// ExecutionHistoryMB is the size of the tenant's stored execution history as the retention job
	// last measured it (its finished invocations), in MiB rounded up.
	ExecutionHistoryMB int64 `json:"execution_history_mb"`
}

// Quotas are the policy's quotas that usage is measured against; an unset quota (no limit) is left out.
type Quotas struct {
	MaxConcurrentExecutions *int64 `json:"max_concurrent_executions,omitempty"`
	MaxDefinitions          *int64 `json:"max_definitions,omitempty"`
	MaxSchedules            *int64 `json:"max_schedules,omitempty"`
	MaxTriggers             *int64 `json:"max_triggers,omitempty"`
	MaxExecutionHistoryMB   *int64 `json:"max_execution_history_mb,omitempty"`
}

// Utilization is 000's UsageUtilization: current / quota × 100, rounded to two decimals; left out
// where the quota is unset. A quota of 0 with nothing used is 100 (nothing more fits).
type Utilization struct {
	ConcurrentExecutions *float64 `json:"concurrent_executions,omitempty"`
	Definitions          *float64 `json:"definitions,omitempty"`
	Schedules            *float64 `json:"schedules,omitempty"`
	Triggers             *float64 `json:"triggers,omitempty"`
	ExecutionHistory     *float64 `json:"execution_history,omitempty"`
}

func percent(cur int64, quota *int64) *float64 {
	if quota == nil {
		return nil
	}
	p := 100.0
	if *quota > 0 {
		p = math.Round(float64(cur)/float64(*quota)*100*100) / 100
	}
	return &p
}

// Current returns the tenant's current usage against its quotas.
func (s *Service) Current(ctx context.Context, sc auth.SecurityContext, tenantID string) (Report, error) {
	p, err := s.policies.Policy(ctx, sc, tenantID)
	if err != nil {
		return Report{}, err
	}
	r := Report{TenantID: tenantID, Timestamp: s.clock.Now()}
	if r.Current.ConcurrentExecutions, err = s.store.CountTenantRunning(ctx, tenantID); err != nil {
		return r, problem.Internal(err)
	}
	if r.Current.TotalDefinitions, err = s.store.CountTenantEntrypoints(ctx, tenantID); err != nil {
		return r, problem.Internal(err)
	}
	if r.Current.TotalSchedules, err = s.store.CountTenantSchedules(ctx, tenantID); err != nil {
		return r, problem.Internal(err)
	}
	if r.Current.TotalTriggers, err = s.triggerCount(ctx, tenantID); err != nil {
		return r, problem.Internal(err)
	}
	history, err := s.store.TenantHistoryBytes(ctx, tenantID)
	if err != nil {
		return r, problem.Internal(err)
	}
	r.Current.ExecutionHistoryMB = (history + 1<<20 - 1) >> 20
	q := p.Quotas
	r.Quotas = Quotas{MaxConcurrentExecutions: q.MaxConcurrentExecutions, MaxDefinitions: q.MaxDefinitions,
		MaxSchedules: q.MaxSchedules, MaxTriggers: q.MaxTriggers, MaxExecutionHistoryMB: q.MaxExecutionHistoryMB}
	c := r.Current
	r.UtilizationPercent = Utilization{
		ConcurrentExecutions: percent(c.ConcurrentExecutions, q.MaxConcurrentExecutions),
		Definitions:          percent(c.TotalDefinitions, q.MaxDefinitions),
		Schedules:            percent(c.TotalSchedules, q.MaxSchedules),
		Triggers:             percent(c.TotalTriggers, q.MaxTriggers),
		ExecutionHistory:     percent(c.ExecutionHistoryMB, q.MaxExecutionHistoryMB),
	}
	return r, nil
}

// History is the answer of GET /tenants/{tenant_id}/usage/history.
type History struct {
	TenantID    string      `json:"tenant_id"`
	Granularity Granularity `json:"granularity"`
	Start       time.Time   `json:"start"`
	End         time.Time   `json:"end"`
	// Currency is the currency of every cost (the operator's pricing).
	Currency string   `json:"currency"`
	Buckets  []Bucket `json:"buckets"`
	// Totals sums the buckets, with the per-entrypoint breakdown of the whole range.
	Totals Totals `json:"totals"`
}

// Figures are the usage of a bucket, an entrypoint or a range.
type Figures struct {
	// Invocations counts invocations created.
	Invocations int64 `json:"invocations"`
	// Finished counts runs that finished; ByStatus splits them by how they finished.
	Finished int64    `json:"finished"`
	ByStatus ByStatus `json:"by_status"`
	// DeadLettered and Compensated count entries into those statuses, which follow a finish.
	DeadLettered int64 `json:"dead_lettered"`
	Compensated  int64 `json:"compensated"`
	// Executions counts function attempts and workflow activations; the rest sums their metrics.
	Executions       int64   `json:"executions"`
	DurationMS       int64   `json:"duration_ms"`
	BilledDurationMS int64   `json:"billed_duration_ms"`
	CPUSeconds       float64 `json:"cpu_seconds"`
	MemoryGBSeconds  float64 `json:"memory_gb_seconds"`
	EgressBytes      int64   `json:"egress_bytes"`
	Cost             float64 `json:"cost"`
}

// ByStatus splits finished runs by the status they finished with.
type ByStatus struct {
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Canceled  int64 `json:"canceled"`
}

func figuresOf(u invocation.Usage) Figures {
	return Figures{Invocations: u.Invocations, Finished: u.Finished(),
		ByStatus:     ByStatus{Succeeded: u.Succeeded, Failed: u.Failed, Canceled: u.Canceled},
		DeadLettered: u.DeadLettered, Compensated: u.Compensated, Executions: u.Executions, DurationMS: u.DurationMS,
		BilledDurationMS: u.BilledDurationMS, CPUSeconds: u.CPUSeconds(), MemoryGBSeconds: u.MemoryGBSeconds(),
		EgressBytes: u.EgressBytes, Cost: u.Cost}
}

// EntrypointFigures are one entrypoint version's figures.
type EntrypointFigures struct {
	EntrypointID string `json:"entrypoint_id"`
	Figures
}

// Bucket is one period of the history (start inclusive, end exclusive).
type Bucket struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Figures
	Entrypoints []EntrypointFigures `json:"entrypoints"`
}

// Totals are a whole range's figures.
type Totals struct {
	Figures
	Entrypoints []EntrypointFigures `json:"entrypoints"`
}

// History returns the tenant's usage over the window q selects (see ParseWindow), every bucket of
// it included, empty ones too.
func (s *Service) History(ctx context.Context, sc auth.SecurityContext, tenantID string, q HistoryQuery) (History, error) {
	if _, err := s.policies.Policy(ctx, sc, tenantID); err != nil {
		return History{}, err
	}
	w, err := ParseWindow(q, s.clock.Now())
	if err != nil {
		return History{}, err
	}
	rows, err := s.store.UsageHistory(ctx, tenantID, store.UsageQuery{From: w.Start, To: w.End, Width: w.Granularity.width()})
	if err != nil {
		return History{}, problem.Internal(err)
	}
	h := History{TenantID: tenantID, Granularity: w.Granularity, Start: w.Start, End: w.End, Currency: s.currency}
	var total invocation.Usage
	perEP := map[string]*invocation.Usage{}
	var order []string
	i := 0
	for start := w.Start; start.Before(w.End); start = start.Add(w.Granularity.width()) {
		b := Bucket{Start: start, End: start.Add(w.Granularity.width()), Entrypoints: []EntrypointFigures{}}
		var sum invocation.Usage
		for ; i < len(rows) && rows[i].Start.Equal(start); i++ {
			r := rows[i]
			sum.Add(r.Usage)
			b.Entrypoints = append(b.Entrypoints, EntrypointFigures{EntrypointID: r.EntrypointID, Figures: figuresOf(r.Usage)})
			if perEP[r.EntrypointID] == nil {
				perEP[r.EntrypointID] = &invocation.Usage{}
				order = append(order, r.EntrypointID)
			}
			perEP[r.EntrypointID].Add(r.Usage)
		}
		b.Figures = figuresOf(sum)
		total.Add(sum)
		h.Buckets = append(h.Buckets, b)
	}
	h.Totals = Totals{Figures: figuresOf(total), Entrypoints: make([]EntrypointFigures, 0, len(order))}
	slices.Sort(order)
	for _, id := range order {
		h.Totals.Entrypoints = append(h.Totals.Entrypoints, EntrypointFigures{EntrypointID: id, Figures: figuresOf(*perEP[id])})
	}
	return h, nil
}

// triggerCount is total_triggers: the tenant's event triggers and webhook triggers (both take
// quotas.max_triggers).
func (s *Service) triggerCount(ctx context.Context, tenantID string) (int64, error) {
	n, err := s.store.CountTenantTriggers(ctx, tenantID)
	if err != nil {
		return 0, err
	}
	w, err := s.store.CountTenantWebhookTriggers(ctx, tenantID)
	return n + w, err
}
