package e2e

// The noisy neighbour: while tenant A runs hostile code (memory, CPU, log and fan-out bombs), tenant
// B's small sync calls keep their latency, and the server's memory stays bounded.

import (
	"fmt"
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
	measure := func(rss *int64) time.Duration {
		ds := make([]time.Duration, 0, n)
		for range n {
			ds = append(ds, call())
			if rss != nil {
				*rss = max(*rss, rssKB(p.cmd.Process.Pid))
			}
		}
		return p99(ds)
	}
	// The ratio of two p99s on a shared 2-core machine moves with what else runs there (another
	// VM's burst in the loud window is enough to cross 3x once in a while): the check is made up to
	// three times, each with quiet and loud measured afresh, and holds if one of them meets it. A
	// real loss of isolation misses it every time (22.8x before the CPU was shared, 4-5x before
	// user code interpreted at a lower OS priority).
	const attempts = 3
	var ratios []string
	for attempt := 1; ; attempt++ {
		qp := measure(nil)
		baseRSS := rssKB(p.cmd.Process.Pid)
		answers := make([]response, 2*len(hostile))
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = p.invoke(t, a, hostile[i%len(hostile)], "async", nil)
			}()
		}
		wg.Wait()
		started := make([]string, len(answers))
		for i, r := range answers {
			started[i] = record(t, r, http.StatusAccepted).ID
		}
		var peakRSS int64
		lp := measure(&peakRSS)
		ratio := float64(lp) / float64(qp)
		ratios = append(ratios, fmt.Sprintf("%.1fx", ratio))
		t.Logf("attempt %d: tenant B sync p99: quiet %v, with tenant A's 8 hostile invocations %v (%.1fx); RSS %d MiB before, peak %d MiB",
			attempt, qp, lp, ratio, baseRSS/1024, peakRSS/1024)
		if peakRSS > 0 {
			require.Less(t, peakRSS, int64(512*1024), "server RSS under 512 MiB (measured: about 50 MiB)")
		}
		// Measured 1.8-2.3x on a 2-core machine (docs/security.md, "Noisy neighbours").
		if lp <= 3*qp {
			return
		}
		require.Less(t, attempt, attempts, "tenant B's p99 within 3x of its quiet p99 in one of %d measurements: %v", attempts, ratios)
		// The next quiet measurement starts once tenant A's invocations are over.
		for _, id := range started {
			waitTerminal(t, p, a, id)
		}
	}
}

// waitTerminal waits (at most a minute) until invocation id, read with token, has ended.
func waitTerminal(t *testing.T, p *larkProc, token, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		switch record(t, p.do(http.MethodGet, apiBase+"/invocations/"+id, token, nil), http.StatusOK).Status {
		case "succeeded", "failed", "canceled", "dead_lettered", "compensated":
			return
		}
		require.True(t, time.Now().Before(deadline), "invocation %s has not ended", id)
		time.Sleep(20 * time.Millisecond)
	}
}
