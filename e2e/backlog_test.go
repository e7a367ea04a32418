package e2e

// Busy is normal: a backlog of CPU-bound work completes instead of timing out in the queue, the
// work that cannot start yet stays visibly queued, and a sync call that cannot start within its
// timeout is refused with 503 and Retry-After instead of failing.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// The backlog's function spins for backlogWork of CPU under a timeout of backlogTimeout. Only the
// ratios matter (the backlog waits longer than a timeout; one run is well within it): the issue's
// 0.3 s and 10 s took twice as long to drain to the same bound.
const (
	backlogWork    = 150 * time.Millisecond
	backlogTimeout = 5 * time.Second
)

// cpuBoundSrc spins for input.n loop iterations (about 0.3 s of CPU for n = 1,000,000 here).
const cpuBoundSrc = "def main(ctx, input):\n  x = 0\n  for i in range(input.n):\n    x += i\n  return {\"x\": x}\n"

// calibrate returns the loop count that takes about want of CPU in one sync call of id.
func calibrate(t *testing.T, p *larkProc, token, id string, want time.Duration) int {
	t.Helper()
	n := 200000
	for range 6 {
		// The quickest of three calls: a busy machine makes a call slower, never quicker.
		ms := int64(math.MaxInt64)
		for range 3 {
			rec := record(t, p.invoke(t, token, id, "sync", map[string]any{"n": n}), http.StatusOK)
			require.Equal(t, "succeeded", rec.Status, "calibration call: %+v", rec.Error)
			ms = min(ms, *rec.Observability.Metrics.DurationMS)
		}
		if ms >= 20 {
			return int(float64(n) * float64(want.Milliseconds()) / float64(ms))
		}
		n *= 4
	}
	t.Fatal("the calibration loop never took 20 ms")
	return 0
}

func TestCPUBoundBacklogCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("a backlog of CPU-bound work: about a minute; skipped with -short")
	}
	t.Parallel()
	p := startLark(t, t.TempDir())
	drainBacklog(t, []*larkProc{p}, envCount("LARK_E2E_BACKLOG", 200)) // 400: the larger backlog
}

func TestCPUBoundBacklogOnTwoPostgresNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("a backlog of CPU-bound work on two nodes: about a minute; skipped with -short")
	}
	url := pgtest.Schema(t) // skips, saying so, without LARK_TEST_POSTGRES_URL
	t.Parallel()
	data := t.TempDir()
	n1 := startLark(t, data, "--store", url, "--node-id", "n1")
	n2 := startLark(t, data, "--store", url, "--node-id", "n2")
	// The 10x backlog is LARK_E2E_BACKLOG_PG=2000 (about six minutes on a 2-core machine).
	drainBacklog(t, []*larkProc{n1, n2}, envCount("LARK_E2E_BACKLOG_PG", 300))
}

// envCount is the positive integer in the environment variable name, or def.
func envCount(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// backlogRecord is what drainBacklog reads of each invocation.
type backlogRecord struct {
	ID     string `json:"invocation_id"`
	Status string `json:"status"`
	Error  *struct {
		TypeID string `json:"error_type_id"`
	} `json:"error"`
	Observability struct {
		Metrics struct {
			QueueWaitMS *int64 `json:"queue_wait_ms"`
			DurationMS  *int64 `json:"duration_ms"`
		} `json:"metrics"`
	} `json:"observability"`
}

// drainBacklog starts count async invocations of a function spinning for about backlogWork of CPU
// (timeout backlogTimeout, 3 attempts) through the nodes in turn, and checks that the backlog waits queued
// and that every one of them succeeds, however long it waited.
func drainBacklog(t *testing.T, nodes []*larkProc, count int) {
	p := nodes[0]
	id := p.register(t, p.Token, fnSpec{id: fnPrefix + "vendor.app.backlog.spin.v1~", src: cpuBoundSrc,
		limits: map[string]any{"timeout_seconds": int(backlogTimeout.Seconds()), "cpu": 1.0}, retry: 3})
	n := calibrate(t, p, p.Token, id, backlogWork)
	accepted := make([]string, count)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 { // within the tenant's in-flight cap
		wg.Go(func() {
			for i := range next {
				node := nodes[i%len(nodes)]
				if r := node.invoke(t, p.Token, id, "async", map[string]any{"n": n}); r.Status == http.StatusAccepted {
					accepted[i] = record(t, r, http.StatusAccepted).ID
				}
			}
		})
	}
	for i := range accepted {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, a := range accepted {
		require.NotEmpty(t, a, "start %d was not accepted", i)
	}
	since := time.Now()
	// While the backlog drains, what cannot start yet waits queued: only a few run at once.
	counts := statusCounts(t, p)
	require.LessOrEqual(t, counts["running"], 16*len(nodes), "running at once while %d wait: %v", count, counts)
	require.Greater(t, counts["queued"], count/2, "the backlog waits queued: %v", counts)

	byID := waitAllTerminal[backlogRecord](t, p, accepted, since, 15*time.Minute, nil)
	var longestWait int64
	for _, id := range accepted {
		r := byID[id]
		require.Equal(t, "succeeded", r.Status, "invocation %s: %+v", id, r.Error)
		require.NotNil(t, r.Observability.Metrics.QueueWaitMS, "queue wait recorded for %s", id)
		require.Less(t, *r.Observability.Metrics.DurationMS, backlogTimeout.Milliseconds(), "run time excludes the queue wait")
		longestWait = max(longestWait, *r.Observability.Metrics.QueueWaitMS)
	}
	require.Greater(t, longestWait, backlogTimeout.Milliseconds(), "the last of the backlog waited longer than a timeout, queued, and still succeeded")
	t.Logf("%d CPU-bound invocations (n=%d) on %d node(s) drained in %v; the longest queue wait %d ms",
		count, n, len(nodes), time.Since(since), longestWait)
}

// statusCounts counts the tenant's invocations by status.
func statusCounts(t *testing.T, p *larkProc) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, raw := range p.listAll(apiBase+"/invocations", p.Token) {
		var head struct {
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal(raw, &head))
		counts[head.Status]++
	}
	return counts
}

func TestSyncCallsThatCannotStartAreRefused(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var arrived atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(upstream.Close)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	// A tenant share of 64 MiB: the holder, past 16 MiB of allocations, reserves its whole
	// memory_mb (64) and keeps it while it waits on the upstream; nothing else of the tenant fits.
	p := startLark(t, t.TempDir(), "--unsafe-egress-allow-loopback", "--tenant-execution-memory-mb", "64")
	holder := p.register(t, p.Token, fnSpec{id: fnPrefix + "vendor.app.backlog.holder.v1~", src: fmt.Sprintf(
		"def main(ctx, input):\n  held = [\"x\" * 1048576 for i in range(20)]\n  r = r_await(r_http_get_v1(%q, timeout_ms=20000))\n  return {\"n\": len(held), \"status\": r.response.status_code}\n",
		upstream.URL), limits: map[string]any{"memory_mb": 64, "timeout_seconds": 30}})
	small := p.register(t, p.Token, fnSpec{id: fnPrefix + "vendor.app.backlog.small.v1~",
		src: "def main(ctx, input):\n  return {\"ok\": True}\n", limits: map[string]any{"timeout_seconds": 1}})
	body := mustJSON(t, map[string]any{"entrypoint_id": holder, "mode": "sync", "params": map[string]any{}})
	held := make(chan response, 1)
	go func() { held <- p.do(http.MethodPost, apiBase+"/invocations", p.Token, body) }()
	deadline := time.Now().Add(20 * time.Second)
	for arrived.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "the holder never called its upstream")
		time.Sleep(5 * time.Millisecond)
	}

	start := time.Now()
	r := p.invoke(t, p.Token, small, "sync", nil)
	pd := requireProblem(t, r, http.StatusServiceUnavailable)
	require.Equal(t, "gts://"+errType("unavailable"), pd.Type, "%s", r)
	require.NotEmpty(t, r.Header.Get("Retry-After"), "a refused sync call says when to retry")
	require.GreaterOrEqual(t, time.Since(start), time.Second, "it waited its whole timeout for a place")

	unblock()
	require.Equal(t, "succeeded", record(t, <-held, http.StatusOK).Status, "the admitted call runs to its end")
	require.Equal(t, "succeeded", record(t, p.invoke(t, p.Token, small, "sync", nil), http.StatusOK).Status,
		"once the memory is given back, the same call starts")
	counts := statusCounts(t, p)
	require.Equal(t, map[string]int{"succeeded": 2}, counts, "the refused call left nothing behind")
}
