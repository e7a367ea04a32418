package e2e

// Bounded process memory: while tenant A's sync calls each allocate 200 MiB, three at a time,
// the server's resident set grows by at most 300 MB, tenant B's small calls keep their latency,
// and the resident set returns toward its baseline afterwards.

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// churnSrc allocates 200 distinct strings of 1 MiB and keeps them until it returns.
const churnSrc = "def main(ctx, input):\n  held = []\n  for i in range(200):\n    held.append(\"x\" * 1048576)\n  return {\"n\": len(held)}\n"

// TestMemoryChurnStaysBounded stays serial: it compares tenant B's p99 with and without tenant A's
// churn, and with the other e2e tests running beside it (under -race, on a 2-CPU machine) their
// load moved B's p99 more than A's churn did (quiet 7-10 ms, loud 34-40 ms in CI; 3-4 and 12-16
// ms alone).
func TestMemoryChurnStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("memory churn: several seconds of 200 MiB calls; skipped with -short")
	}
	p := startLark(t, t.TempDir())
	p.tenant(t, "churner")
	p.tenant(t, "bystander")
	a := p.token(t, "churner", "mallory", "developer")
	b := p.token(t, "bystander", "bob", "developer")
	churn := p.register(t, a, fnSpec{id: fnPrefix + "vendor.app.churn.alloc.v1~", src: churnSrc,
		limits: map[string]any{"memory_mb": 256, "timeout_seconds": 60}})
	small := p.register(t, b, fnSpec{id: fnPrefix + "vendor.app.churn.small.v1~", src: "def main(ctx, input):\n  return {\"sum\": input.a + input.b}\n"})
	call := func() time.Duration {
		start := time.Now()
		r := p.invoke(t, b, small, "sync", map[string]any{"a": 1, "b": 2})
		d := time.Since(start)
		require.Equal(t, "succeeded", record(t, r, http.StatusOK).Status, "%s", r)
		return d
	}
	measure := func(n int, rss *int64) time.Duration {
		ds := make([]time.Duration, 0, n)
		for range n {
			ds = append(ds, call())
			if rss != nil {
				*rss = max(*rss, rssKB(p.cmd.Process.Pid))
			}
		}
		return p99(ds)
	}
	for range 20 {
		call() // warm up
	}
	base := rssKB(p.cmd.Process.Pid)
	var stop atomic.Bool
	var churned atomic.Int64
	var wg sync.WaitGroup
	churners := func() {
		for range 3 { // three loops of tenant A's 200 MiB calls
			wg.Go(func() {
				for !stop.Load() {
					r := p.invoke(t, a, churn, "sync", nil)
					if r.Status == http.StatusOK && record(t, r, http.StatusOK).Status == "succeeded" {
						churned.Add(1)
					}
				}
			})
		}
	}
	// As in TestNoisyNeighbour, the p99 ratio is measured up to three times (quiet, then loud),
	// and holds if one measurement meets it; the RSS bound holds in every one.
	var peak int64
	var ratios []string
	for attempt := 1; ; attempt++ {
		quiet := measure(300, nil)
		stop.Store(false)
		before := churned.Load()
		churners()
		deadline := time.Now().Add(2 * time.Minute)
		for churned.Load() < before+3 && time.Now().Before(deadline) {
			peak = max(peak, rssKB(p.cmd.Process.Pid))
			time.Sleep(10 * time.Millisecond)
		}
		loud := measure(300, &peak)
		stop.Store(true)
		wg.Wait()
		require.GreaterOrEqual(t, churned.Load(), before+3, "tenant A's calls succeed (admitted one after another)")
		growthMB := (peak - base) / 1024
		ratios = append(ratios, fmt.Sprintf("%.1fx", float64(loud)/float64(quiet)))
		t.Logf("attempt %d: tenant B sync p99: quiet %v, with tenant A's 200 MiB calls %v (%s); RSS %d MiB before, peak %d MiB (+%d MiB); %d calls of A",
			attempt, quiet, loud, ratios[len(ratios)-1], base/1024, peak/1024, growthMB, churned.Load())
		if peak > 0 {
			require.Less(t, growthMB, int64(300), "server RSS growth under 300 MB while tenant A churns 3 x 200 MiB")
		}
		// As under big payloads, the quiet p99 counts as at least busyQuietFloor: CI measured
		// 16-23 ms over 3-4 ms while the other e2e tests shared the machine, 1.8x alone.
		if loud <= 3*max(quiet, busyQuietFloor) {
			break
		}
		require.Less(t, attempt, 3, "tenant B's p99 within 3x of its quiet p99 (at least 10 ms) in one of 3 measurements: %v", ratios)
	}
	if peak == 0 {
		return // no /proc: nothing more to measure
	}
	// Once the burst is over, the heap and the resident set go back toward the baseline.
	settle := time.Now().Add(30 * time.Second)
	for {
		now := rssKB(p.cmd.Process.Pid)
		if now-base < (peak-base)/2 || now-base < 64*1024 {
			t.Logf("RSS back to %d MiB", now/1024)
			return
		}
		require.True(t, time.Now().Before(settle), "RSS stays at %d MiB after the burst (base %d, peak %d)", now/1024, base/1024, peak/1024)
		call() // some ordinary traffic, as a server has
		time.Sleep(100 * time.Millisecond)
	}
}
