package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/scheduler"
)

// TestFireLag: each run the loop starts reports its fire lag once committed: the time from its
// instant to its recording on the clock (0 for a run queued ahead of its instant).
func TestFireLag(t *testing.T) {
	var mu sync.Mutex
	var lags []time.Duration
	e := newFireEnv(t, scheduler.Options{Lookahead: 5 * time.Second, FireLag: func(d time.Duration) {
		mu.Lock()
		lags = append(lags, d)
		mu.Unlock()
	}})
	late := e.every5(t, schedule.ConcurrencyForbid)
	e.every5(t, schedule.ConcurrencyAllow)
	five := late.NextRunAt.UTC()

	e.clk.Set(five.Add(-3 * time.Second)) // the allow schedule fires ahead; the forbid one waits
	n, err := e.sched.FireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	e.clk.Set(five.Add(2 * time.Second)) // the forbid one fires 2 s late
	n, err = e.sched.FireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []time.Duration{0, 2 * time.Second}, lags)
}
