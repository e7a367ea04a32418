package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func durations(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, v := range ms {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", durations(7), 50, 7 * time.Millisecond},
		{"one value p99", durations(7), 99, 7 * time.Millisecond},
		{"median of three", durations(1, 2, 3), 50, 2 * time.Millisecond},
		{"median of four is the lower middle", durations(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p90 of 1..100", hundred, 90, 90 * time.Millisecond},
		{"p100 is the maximum", hundred, 100, 100 * time.Millisecond},
		{"tiny p is the minimum", hundred, 0.001, 1 * time.Millisecond},
		{"p99 of ten is the maximum", durations(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Percentile(tc.sorted, tc.p))
		})
	}
	// p*n/100 must not round down through floating point: 99% of 1000 is exactly rank 990.
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(i + 1)
	}
	require.Equal(t, time.Duration(990), Percentile(thousand, 99))
	require.Equal(t, time.Duration(500), Percentile(thousand, 50))
}

func TestRecorderExactBelowCapacity(t *testing.T) {
	r := NewRecorder(0)
	for _, d := range durations(5, 1, 4, 2, 3) {
		r.Add(d)
	}
	s := r.Summary()
	require.Equal(t, Summary{Count: 5, Samples: 5, MinMs: 1, MeanMs: 3, P50Ms: 3, P90Ms: 5, P99Ms: 5, MaxMs: 5}, s)
	require.Equal(t, Summary{}, NewRecorder(10).Summary(), "an empty recorder summarizes to zeros")
}

func TestRecorderCapsMemoryAndStaysUnbiased(t *testing.T) {
	const capacity, n = 2000, 200_000
	r := NewRecorder(capacity)
	// Values 1..n ms in a shuffled-ish order (a stride coprime with n), so that a recorder keeping
	// only the first values would be badly biased.
	for i := 0; i < n; i++ {
		r.Add(time.Duration((i*7919)%n+1) * time.Millisecond)
	}
	s := r.Summary()
	require.Equal(t, int64(n), s.Count)
	require.Equal(t, capacity, s.Samples)
	require.Equal(t, 1.0, s.MinMs)
	require.Equal(t, float64(n), s.MaxMs)
	require.InDelta(t, float64(n+1)/2, s.MeanMs, 1, "the mean is exact")
	require.InDelta(t, 0.50*n, s.P50Ms, 0.05*n, "the sampled median")
	require.InDelta(t, 0.99*n, s.P99Ms, 0.02*n, "the sampled p99")
}

func TestRecorderConcurrentAdds(t *testing.T) {
	r := NewRecorder(100)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 1000 {
				r.Add(time.Duration(i))
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(8000), r.Count())
	require.Equal(t, 100, r.Summary().Samples)
}

func TestLoadCountMode(t *testing.T) {
	var calls atomic.Int64
	res := Load{Workers: 8, Count: 1000, Do: func(context.Context) error {
		if calls.Add(1)%10 == 0 {
			return errors.New("every tenth fails")
		}
		return nil
	}}.Run(context.Background())
	require.Equal(t, int64(1000), calls.Load(), "exactly Count requests")
	require.Equal(t, int64(100), res.Errors)
	require.Equal(t, int64(900), res.Requests)
	require.Equal(t, int64(900), res.Latency.Count)
	require.Equal(t, []string{"every tenth fails"}, res.ErrorSamples, "distinct messages only")
	require.Positive(t, res.Throughput)
	require.InDelta(t, float64(res.Requests)/res.Window.Seconds(), res.Throughput, 1e-6)
}

func TestLoadDurationModeExcludesWarmup(t *testing.T) {
	var mu sync.Mutex
	var marks []string
	var markTimes []time.Time
	var calls atomic.Int64
	start := time.Now()
	res := Load{Workers: 4, Warmup: 150 * time.Millisecond, Duration: 300 * time.Millisecond,
		Mark: func(phase string) {
			mu.Lock()
			marks, markTimes = append(marks, phase), append(markTimes, time.Now())
			mu.Unlock()
		},
		Do: func(context.Context) error {
			calls.Add(1)
			time.Sleep(2 * time.Millisecond)
			return nil
		}}.Run(context.Background())
	took := time.Since(start)
	require.Equal(t, []string{"measure", "end"}, marks)
	require.InDelta(t, 150, markTimes[0].Sub(start).Milliseconds(), 50)
	require.InDelta(t, 300, markTimes[1].Sub(markTimes[0]).Milliseconds(), 50)
	require.GreaterOrEqual(t, took, 450*time.Millisecond)
	require.Zero(t, res.Errors)
	require.Equal(t, 300*time.Millisecond, res.Window)
	require.Positive(t, res.Requests)
	require.Less(t, res.Requests, calls.Load(), "warm-up requests are not counted")
	require.InDelta(t, float64(res.Requests)/0.3, res.Throughput, 1e-6)
	require.GreaterOrEqual(t, res.Latency.P50Ms, 2.0)
}

func TestLoadStopsAfterMaxErrors(t *testing.T) {
	start := time.Now()
	res := Load{Workers: 4, Duration: 10 * time.Second, MaxErrors: 50, Do: func(context.Context) error {
		return errors.New("connection refused")
	}}.Run(context.Background())
	require.Less(t, time.Since(start), 5*time.Second, "a dead server does not keep the run going")
	require.GreaterOrEqual(t, res.Errors, int64(50))
	require.Zero(t, res.Requests)
	require.Zero(t, res.Throughput)
}

func TestLoadStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	var marks []string
	res := Load{Workers: 2, Duration: 10 * time.Second, Mark: func(p string) { marks = append(marks, p) },
		Do: func(ctx context.Context) error {
			select {
			case <-time.After(time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err() // a request cut short by the end of the run
			}
		}}.Run(ctx)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Less(t, res.Window, time.Second)
	require.Positive(t, res.Requests)
	require.Zero(t, res.Errors, "requests cut short by the caller's cancellation are not errors")
	require.Equal(t, []string{"measure", "end"}, marks, "the window is closed when the run stops early")
}

func TestErrorLogKeepsFewDistinctSamples(t *testing.T) {
	var e errorLog
	for i := range 20 {
		e.add(errors.New(string(rune('a' + i%7))))
	}
	require.Equal(t, int64(20), e.n.Load())
	require.Len(t, e.samples, maxErrorSamples)
	require.True(t, slices.Equal(e.samples, []string{"a", "b", "c", "d", "e"}))
}
