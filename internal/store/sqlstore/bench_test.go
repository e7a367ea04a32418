package sqlstore_test

import (
	"context"
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
					if _, err := tx.CreateInvocation(storetest.NewInvocationEvent(ids[i], "acme", "ep_1", dt0)); err != nil {
						return err
					}
					if _, _, err := tx.AppendEvents("acme", ids[i], []invocation.Event{
						statusEvent(ids[i], invocation.EventStarted, "", dt0),
					}); err != nil {
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
							_, appended, err := tx.AppendEvents("acme", id, []invocation.Event{ev})
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
