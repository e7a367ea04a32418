package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/eventbus"
	"github.com/larkrun/lark/internal/eventfilter"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/eventtrigger"
	"github.com/larkrun/lark/internal/store"
)

// BenchmarkPublishTriggers publishes events from parallel publishers into a tenant with 100 event
// triggers on the event's type, each with a CEL filter (payload.shard == i: every event matches one
// trigger and starts one invocation; no dispatcher runs). It reports events/s, and the CEL cost
// per event (100 filter evaluations) measured apart. The baselines: "raw" inserts the same event
// rows through the store alone, "no_triggers" publishes with no trigger.
func BenchmarkPublishTriggers(b *testing.B) {
	for _, c := range []struct {
		name     string
		triggers int
		raw      bool
	}{{"raw", 0, true}, {"no_triggers", 0, false}, {"100_triggers", 100, false}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			adm := invTenant(b, e, "acme")
			ep := e.registerActive(b, adm, echoFn(b, "orders.bench_sink.v1~"))["entrypoint_id"].(string)
			sc := auth.SecurityContext{TenantID: "acme", SubjectID: "bench", Roles: []auth.Role{auth.RoleAdmin}}
			ctx := context.Background()
			filters := make([]string, c.triggers)
			for i := range c.triggers {
				filters[i] = fmt.Sprintf("payload.shard == %d && payload.total >= 0", i)
				_, err := e.srv.Triggers.Create(ctx, sc, eventtrigger.Spec{TriggerID: fmt.Sprintf("t%03d", i), EventTypeID: orderType,
					EntrypointID: ep, EventFilterQuery: filters[i]})
				require.NoError(b, err)
			}
			var seq atomic.Int64
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					payload := json.RawMessage(fmt.Sprintf(`{"shard":%d,"total":%d}`, n%100, n))
					if c.raw {
						ev := events.Event{ID: fmt.Sprintf("r%08d", n), TenantID: "acme", TypeID: orderType, Payload: payload, ReceivedAt: time.Now()}
						require.NoError(b, e.srv.Store.Update(ctx, func(tx store.Tx) error { _, _, err := tx.InsertEvent(ev); return err }))
						continue
					}
					_, err := e.srv.Events.Publish(ctx, sc, eventbus.PublishRequest{EventTypeID: orderType, Payload: payload})
					require.NoError(b, err)
				}
			})
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
			if c.triggers > 0 {
				b.ReportMetric(celPerEvent(b, filters), "cel_ns/event")
			}
		})
	}
}

// celPerEvent measures the evaluation of every filter against one event, in ns.
func celPerEvent(b *testing.B, filters []string) float64 {
	compiled := make([]*eventfilter.Filter, len(filters))
	for i, f := range filters {
		var err error
		compiled[i], err = eventfilter.Cached(f)
		require.NoError(b, err)
	}
	ev := eventfilter.Event{ID: "e", TypeID: orderType, Payload: map[string]any{"shard": json.Number("7"), "total": json.Number("12")}}
	const rounds = 200
	start := time.Now()
	for range rounds {
		for _, f := range compiled {
			_, err := f.Match(ev)
			require.NoError(b, err)
		}
	}
	return float64(time.Since(start).Nanoseconds()) / rounds
}
