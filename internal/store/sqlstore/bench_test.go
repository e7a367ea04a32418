package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/storetest"
)

// BenchmarkAppendEvents appends one log event per op through Store.Update from a fixed number of
// writers, each to its own invocation, with the production settings (WAL, synchronous=FULL, group
// commit). Metrics: writes/s and rows/txn (updates per committed transaction, from CommitStats).
func BenchmarkAppendEvents(b *testing.B) {
	for _, w := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("writers=%d", w), func(b *testing.B) {
			ctx := context.Background()
			s := openAt(b, filepath.Join(b.TempDir(), "lark.db"))
			defer s.Close()
			ids := make([]string, w)
			err := s.Update(ctx, func(tx store.Tx) error {
				for i := range ids {
					ids[i] = fmt.Sprintf("inv_%03d", i)
					if _, err := tx.StartInvocation([]invocation.Event{storetest.NewInvocationEvent(ids[i], "acme", "ep_1", dt0)}, store.Scheduling{}); err != nil {
						return err
					}
					if _, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: ids[i], Events: []invocation.Event{
						statusEvent(ids[i], invocation.EventStarted, "", dt0),
					}}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			batches0, writes0 := s.CommitStats()

			var next atomic.Int64
			var wg sync.WaitGroup
			var once sync.Once
			var first error
			b.ResetTimer()
			start := time.Now()
			for _, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						ev := logEvent(id, fmt.Sprint("op", n), dt0.Add(time.Duration(n)*time.Microsecond))
						err := s.Update(ctx, func(tx store.Tx) error {
							_, appended, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: []invocation.Event{ev}})
							if err == nil && len(appended) != 1 {
								err = fmt.Errorf("%s: appended %d events, want 1", id, len(appended))
							}
							return err
						})
						if err != nil {
							once.Do(func() { first = err })
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if first != nil {
				b.Fatal(first)
			}
			batches, writes := s.CommitStats()
			batches, writes = batches-batches0, writes-writes0
			if writes != uint64(b.N) {
				b.Fatalf("store counted %d writes, want %d", writes, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
			b.ReportMetric(float64(writes)/float64(batches), "rows/txn")
		})
	}
}

// BenchmarkWorkflowStep appends what a workflow step with checkpointing "automatic" writes: one
// step_started and one journal event per op, in one Append that requires the run's lease and
// passes the projection the previous write returned as Expect (as host.Host.PersistJournal does).
// Each writer drives its own invocation. Metric: steps/s.
func BenchmarkWorkflowStep(b *testing.B) {
	for _, w := range []int{1, 50} {
		b.Run(fmt.Sprintf("writers=%d", w), func(b *testing.B) {
			ctx := context.Background()
			s := openAt(b, filepath.Join(b.TempDir(), "lark.db"))
			defer s.Close()
			lease := store.Scheduling{LeaseOwner: "node/1/1", LeaseExpiresAt: &dt0}
			recs := make([]invocation.Record, w)
			err := s.Update(ctx, func(tx store.Tx) error {
				for i := range recs {
					id := fmt.Sprintf("inv_%03d", i)
					var err error
					recs[i], err = tx.StartInvocation([]invocation.Event{storetest.NewInvocationEvent(id, "acme", "ep_1", dt0),
						statusEvent(id, invocation.EventStarted, "", dt0)}, lease)
					if err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			var once sync.Once
			var first error
			b.ResetTimer()
			start := time.Now()
			for i := range recs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					known := recs[i]
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						at := dt0.Add(time.Duration(n) * time.Microsecond)
						step := fmt.Sprint("s", n)
						started := invocation.Event{Type: invocation.EventStepStarted, Data: json.RawMessage(`{"attempt":1,"step":"` + step + `"}`),
							IdempotencyKey: invocation.IdempotencyKey(known.ID, "started-"+step, 1, invocation.EventStepStarted, ""), EngineAttempt: 1, LogicalAttempt: 1, At: at}
						journal := invocation.Event{Type: invocation.EventJournal,
							Data: json.RawMessage(`{"seq":` + fmt.Sprint(n) + `,"helper":"r_run_step_v1","key":"` + step +
								`","args_hash":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","input":3,"result":3,"done":true}`),
							IdempotencyKey: invocation.IdempotencyKey(known.ID, "journal-"+step, 1, invocation.EventJournal, ""), EngineAttempt: 1, LogicalAttempt: 1, At: at}
						var out invocation.Record
						err := s.Update(ctx, func(tx store.Tx) error {
							var err error
							out, _, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: known.ID, Events: []invocation.Event{started, journal}, AppendOptions: store.AppendOptions{RequireLease: lease.LeaseOwner, Expect: &known}})
							return err
						})
						if err != nil {
							once.Do(func() { first = err })
							return
						}
						known = out
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if first != nil {
				b.Fatal(first)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "steps/s")
		})
	}
}
