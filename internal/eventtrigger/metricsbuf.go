package eventtrigger

import (
	"context"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/trigger"
)

// MetricsFlushInterval is how often the counters every published event adds to each active trigger
// of its type (received, filtered out) are written to the store. They are gathered in memory
// after the publishing transaction commits and written together, one row per trigger and hour:
// a publish would otherwise update one metrics row per active trigger inside the single writer.
// A crash loses at most this interval's received and filtered-out counts (never an event, a start
// or an outcome count, which are written with what they count); reads of this process add the
// counts not yet written.
const MetricsFlushInterval = time.Second

// metricsBuffer holds counter deltas not yet written, one per tenant, trigger and hour.
type metricsBuffer struct {
	mu sync.Mutex
	m  map[metricsKey]trigger.Counters
}

type metricsKey struct {
	tenantID, triggerID string
	hour                time.Time
}

// add merges ds (counters only: latencies are written with the outcome they measure).
func (b *metricsBuffer) add(ds []trigger.MetricsDelta) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[metricsKey]trigger.Counters{}
	}
	for _, d := range ds {
		k := metricsKey{d.TenantID, d.TriggerID, d.Hour.UTC().Truncate(time.Hour)}
		c := b.m[k]
		c.Add(d.Counters)
		b.m[k] = c
	}
}

// take empties the buffer and returns what it held as deltas.
func (b *metricsBuffer) take() []trigger.MetricsDelta {
	b.mu.Lock()
	m := b.m
	b.m = nil
	b.mu.Unlock()
	out := make([]trigger.MetricsDelta, 0, len(m))
	for k, c := range m {
		out = append(out, trigger.MetricsDelta{TenantID: k.tenantID, TriggerID: k.triggerID, Hour: k.hour, Counters: c, LatencyMS: -1})
	}
	return out
}

// pending sums what the buffer holds for one trigger from the hour of from on.
func (b *metricsBuffer) pending(tenantID, triggerID string, from time.Time) trigger.Counters {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out trigger.Counters
	for k, c := range b.m {
		if k.tenantID == tenantID && k.triggerID == triggerID && !k.hour.Before(from) {
			out.Add(c)
		}
	}
	return out
}

// FlushMetrics writes the buffered counters in one transaction; on failure they are kept for the
// next flush. Run calls it every MetricsFlushInterval and once more when it stops.
func (s *Service) FlushMetrics(ctx context.Context) error {
	ds := s.metrics.take()
	if len(ds) == 0 {
		return nil
	}
	err := s.store.Update(ctx, func(tx store.Tx) error { return tx.AddTriggerMetrics(ds...) })
	if err != nil {
		s.metrics.add(ds)
	}
	return err
}

// RunMetrics writes the buffered counters every MetricsFlushInterval until ctx ends, and once more
// then. It is a per-node loop (internal/loops): every node buffers the counts of the events it
// publishes, while Run, the batch flusher, runs on the leader only (Run flushes too, harmlessly:
// each flush takes what the buffer holds).
func (s *Service) RunMetrics(ctx context.Context) {
	t := time.NewTicker(MetricsFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := s.FlushMetrics(fctx); err != nil {
				s.o.Logger.Error("writing trigger metrics at stop", "err", err)
			}
			return
		case <-t.C:
			if err := s.FlushMetrics(ctx); err != nil && ctx.Err() == nil {
				s.o.Failed(JobTriggers)
				s.o.Logger.Error("writing trigger metrics", "err", err)
			}
		}
	}
}
