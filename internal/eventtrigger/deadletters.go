package eventtrigger

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/trigger"
)

// MaxRedrive bounds the dead letters one redrive-all request starts (the rest stay for the next).
const MaxRedrive = 100

// DeadLetters lists a trigger's dead letters (404 for a trigger the tenant does not have).
func (s *Service) DeadLetters(ctx context.Context, sc auth.SecurityContext, id string, q store.ListQuery) (store.Page[trigger.DeadLetter], error) {
	if _, err := s.Get(ctx, sc, id); err != nil {
		return store.Page[trigger.DeadLetter]{}, err
	}
	return s.store.DeadLetters(ctx, sc.TenantID, id, q)
}

// Redriven is the answer of a redrive: the dead letters it took, each with the invocation it
// started (RedrivenAs), and how many are left.
type Redriven struct {
	Redriven []trigger.DeadLetter `json:"redriven"`
}

// Redrive starts a new invocation for each of the trigger's dead letters ids (nil: the oldest
// MaxRedrive), with the same params, running as the trigger runs its invocations now, and removes
// them from the queue, in one transaction. The new invocations are tracked like the trigger's own
// (a failure dead-letters again). A dead letter id the trigger does not have answers 404.
func (s *Service) Redrive(ctx context.Context, sc auth.SecurityContext, id string, ids []string) (Redriven, error) {
	var out Redriven
	if err := canWrite(sc); err != nil {
		return out, err
	}
	t, err := s.store.Trigger(ctx, sc.TenantID, id)
	if err != nil {
		return out, storeErr(id, err)
	}
	now := s.o.Clock.Now()
	// Planned before the transaction (one plan per params is not needed: params differ per letter,
	// so they are planned inside, as the matcher does).
	err = s.store.Update(ctx, func(tx store.Tx) error {
		out.Redriven = out.Redriven[:0]
		limit := MaxRedrive
		if ids != nil {
			limit = len(ids)
		}
		taken, err := tx.TakeDeadLetters(t.TenantID, t.ID, ids, limit)
		if err != nil {
			return err
		}
		if ids != nil && len(taken) != len(ids) {
			return problem.NotFound("dead letter %s of trigger %s not found", ids[0], t.ID)
		}
		for _, d := range taken {
			p, err := s.inv.Plan(tx.Context(), invoke.SystemStart{As: runAs(t, sc.SubjectID), EntrypointID: t.EntrypointID, Params: d.Params,
				Retry: retryPolicy(t), Trigger: true, Origin: invocation.OriginEventTrigger})
			if err != nil {
				return err
			}
			inv := s.inv.NewID()
			if _, err := s.inv.Enqueue(tx, p, inv, now); err != nil {
				return err
			}
			if err := tx.InsertTriggerStart(trigger.Start{TenantID: t.TenantID, InvocationID: inv, TriggerID: t.ID, EventSeqs: []int64{0},
				EventIDs: d.EventIDs, ReceivedAt: now, StartedAt: now, Params: d.Params, Redrive: true}); err != nil {
				return err
			}
			md := trigger.MetricsDelta{TenantID: t.TenantID, TriggerID: t.ID, Hour: now, LatencyMS: -1}
			md.Triggered = 1
			s.observe(tx, t.TenantID, OutcomeFired)
			s.observe(tx, t.TenantID, OutcomeRedriven)
			if err := tx.AddTriggerMetrics(md); err != nil {
				return err
			}
			d.RedrivenAs = inv
			out.Redriven = append(out.Redriven, d)
		}
		return s.insertAudit(ctx, tx, sc, t, audit.TriggerDeadLettersRedrive, map[string]any{"count": len(out.Redriven)})
	})
	if err != nil {
		return Redriven{}, storeErr(id, err)
	}
	if out.Redriven == nil {
		out.Redriven = []trigger.DeadLetter{}
	}
	return out, nil
}

// Purge deletes every dead letter of a trigger and returns how many there were.
func (s *Service) Purge(ctx context.Context, sc auth.SecurityContext, id string) (int, error) {
	if err := canWrite(sc); err != nil {
		return 0, err
	}
	n := 0
	err := s.store.Update(ctx, func(tx store.Tx) error {
		t, err := tx.Trigger(sc.TenantID, id)
		if err != nil {
			return err
		}
		n = 0
		for {
			taken, err := tx.TakeDeadLetters(t.TenantID, t.ID, nil, 10000)
			if err != nil {
				return err
			}
			n += len(taken)
			if len(taken) < 10000 {
				break
			}
		}
		return s.insertAudit(ctx, tx, sc, t, audit.TriggerDeadLettersPurged, map[string]any{"count": n})
	})
	return n, storeErr(id, err)
}

// Metrics is 002's Get Event Trigger Metrics answer.
type Metrics struct {
	TriggerID string           `json:"trigger_id"`
	Period    string           `json:"period"`
	From      time.Time        `json:"from"`
	Metrics   trigger.Counters `json:"metrics"`
	// P50LatencyMS and P99LatencyMS are the upper bounds of the latency buckets that hold the
	// median and the 99th percentile of the window's end-to-end latencies (first event received →
	// invocation ended); nil without observations.
	P50LatencyMS *int64 `json:"p50_latency_ms"`
	P99LatencyMS *int64 `json:"p99_latency_ms"`
}

var windowPattern = regexp.MustCompile(`^([1-9][0-9]{0,3})([hd])$`)

// MaxWindow is the longest metrics window.
const MaxWindow = 90 * 24 * time.Hour

// ParseWindow reads a metrics window: "<n>h" or "<n>d" (default 24h), at most 90 days. Counters
// are kept per hour: the window covers the hours that overlap it.
func ParseWindow(v string) (time.Duration, error) {
	if v == "" {
		return 24 * time.Hour, nil
	}
	m := windowPattern.FindStringSubmatch(v)
	if m == nil {
		return 0, problem.Validation("window must look like 1h, 24h or 7d", []problem.Issue{{Path: "window", Code: "INVALID_VALUE", Message: "want <n>h or <n>d"}})
	}
	n, _ := strconv.Atoi(m[1])
	d := time.Duration(n) * time.Hour
	if m[2] == "d" {
		d *= 24
	}
	if d > MaxWindow {
		return 0, problem.Validation("window is at most 90d", []problem.Issue{{Path: "window", Code: "INVALID_VALUE", Message: "at most 90d"}})
	}
	return d, nil
}

// Metrics sums a trigger's hourly counters over the window that ends now.
func (s *Service) Metrics(ctx context.Context, sc auth.SecurityContext, id, window string) (Metrics, error) {
	w, err := ParseWindow(window)
	if err != nil {
		return Metrics{}, err
	}
	if _, err := s.Get(ctx, sc, id); err != nil {
		return Metrics{}, err
	}
	from := s.o.Clock.Now().Add(-w).Truncate(time.Hour)
	rows, err := s.store.TriggerMetrics(ctx, sc.TenantID, id, from)
	if err != nil {
		return Metrics{}, problem.Internal(err)
	}
	out := Metrics{TriggerID: id, Period: window, From: from}
	if out.Period == "" {
		out.Period = "24h"
	}
	out.Metrics.Add(s.metrics.pending(sc.TenantID, id, from)) // this process's counts not yet written
	hist := make([]int64, len(trigger.LatencyBounds)+1)
	for _, r := range rows {
		out.Metrics.Add(r.Counters)
		for i, c := range r.Latency {
			hist[i] += c
		}
	}
	out.P50LatencyMS, out.P99LatencyMS = quantile(hist, 0.5), quantile(hist, 0.99)
	return out, nil
}

// quantile is the upper bound of the bucket holding the q-quantile (the last bucket: the largest
// bound); nil without observations.
func quantile(hist []int64, q float64) *int64 {
	var total int64
	for _, c := range hist {
		total += c
	}
	if total == 0 {
		return nil
	}
	rank := int64(math.Ceil(q * float64(total)))
	var seen int64
	for i, c := range hist {
		seen += c
		if seen >= rank {
			b := trigger.LatencyBounds[min(i, len(trigger.LatencyBounds)-1)]
			return &b
		}
	}
	return nil
}
