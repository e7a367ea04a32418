package e2e

// The noisy neighbour: while tenant A runs hostile code (memory, CPU, log and fan-out bombs), tenant
// B's small sync calls keep their latency, and the server's memory stays bounded.

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hostilePrograms are tenant A's eight invocations: two of each kind.
var hostilePrograms = []struct {
	name, src string
	limits    map[string]any
}{
	{"memory", "def main(ctx, input):\n  return [\"x\" * 1000000] * 200\n", map[string]any{"memory_mb": 16}},
	{"cpu", "def main(ctx, input):\n  n = 0\n  while True:\n    n += 1\n", map[string]any{"timeout_seconds": 6, "cpu": 1.0}},
	{"logs", "def main(ctx, input):\n  for i in range(100000):\n    ctx.log(\"L\" * 100000)\n", map[string]any{"timeout_seconds": 6, "memory_mb": 512}},
	{"fanout", "def main(ctx, input):\n  r_await_all([r_invoke_v1(\"" + fnPrefix + "vendor.app.hostile.child.v1~\", {}) for i in range(1000)])\n", map[string]any{"memory_mb": 16, "cpu": 0.1}},
}

// rssKB is the resident set size of pid in KiB (Linux; 0 elsewhere).
func rssKB(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// p99 of durations.
func p99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

func TestNoisyNeighbour(t *testing.T) {
	if testing.Short() {
		t.Skip("noisy neighbour: runs hostile code for several seconds; skipped with -short")
	}
	p := startLark(t, t.TempDir())
	p.tenant(t, "hostile", nil)
	p.tenant(t, "victim", nil)
	a := p.token(t, "hostile", "mallory", "developer")
	b := p.token(t, "victim", "bob", "developer")
	p.register(t, a, fnSpec{id: fnPrefix + "vendor.app.hostile.child.v1~", src: "def main(ctx, input):\n  return {}\n"})
	var hostile []string
	for _, h := range hostilePrograms {
		// LARK_E2E_HOSTILE_ONLY=<name> runs one kind alone, to see what each costs the neighbour.
		if only := os.Getenv("LARK_E2E_HOSTILE_ONLY"); only != "" && only != h.name {
			continue
		}
		hostile = append(hostile, p.register(t, a, fnSpec{id: fnPrefix + "vendor.app.hostile." + h.name + ".v1~", src: h.src, limits: h.limits}))
	}
	small := p.register(t, b, fnSpec{id: fnPrefix + "vendor.app.victim.small.v1~", src: "def main(ctx, input):\n  return {\"sum\": input.a + input.b}\n"})

	call := func() time.Duration {
		start := time.Now()
		r := p.invoke(t, b, small, "sync", map[string]any{"a": 1, "b": 2})
		d := time.Since(start)
		rec := record(t, r, http.StatusOK)
		require.Equal(t, "succeeded", rec.Status, "%s", r)
		return d
	}
	const n = 1000
	for range 20 {
		call() // warm up
	}
	quiet := make([]time.Duration, 0, n)
	for range n {
		quiet = append(quiet, call())
	}
	baseRSS := rssKB(p.cmd.Process.Pid)

	var wg sync.WaitGroup
	for round := range 2 {
		for _, id := range hostile {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := p.invoke(t, a, id, "async", nil)
				require.Equal(t, http.StatusAccepted, r.Status, "round %d: %s", round, r)
			}()
		}
	}
	wg.Wait()
	var peakRSS int64
	loud := make([]time.Duration, 0, n)
	for range n {
		loud = append(loud, call())
		peakRSS = max(peakRSS, rssKB(p.cmd.Process.Pid))
	}
	qp, lp := p99(quiet), p99(loud)
	t.Logf("tenant B sync p99: quiet %v, with tenant A's 8 hostile invocations %v (%.1fx); RSS %d MiB before, peak %d MiB",
		qp, lp, float64(lp)/float64(qp), baseRSS/1024, peakRSS/1024)
	// Measured 1.8-2.3x on a 2-core machine (docs/security.md, "Noisy neighbours"); 22.8x before the
	// CPU was shared between tenants, 4-5x before user code interpreted at a lower OS priority.
	require.LessOrEqual(t, lp, 3*qp, "tenant B's p99 within 3x of its quiet p99")
	if peakRSS > 0 {
		require.Less(t, peakRSS, int64(512*1024), "server RSS under 512 MiB (measured: about 50 MiB)")
	}
}
