package e2e

// The noisy neighbour: while tenant A runs hostile code (memory, CPU, log and fan-out bombs), tenant
// B's small sync calls keep their latency, and the server's memory stays bounded.

import (
	"bytes"
	"context"
	"fmt"
	"io"
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

// hostileLoad is a load of tenant A's that runs for the whole loud measurement, from threads
// goroutines that call again as soon as an answer comes back.
type hostileLoad struct {
	name, src, mode string
	threads         int
	params          func() any
	ok              int // the status that counts as served (429 is counted apart)
	// goal is the most B's p99 may be, over its quiet p99, while this load runs (3x unless said),
	// with the quiet p99 counted as at least quietFloor.
	goal       float64
	quietFloor time.Duration
}

// hostileLoads are tenant A's loads.
var hostileLoads = []hostileLoad{
	// Big payloads: 900 KB of params in, 1.8 MB of result out, every call (held to 3x of a quiet
	// p99 of at least 10 ms: busyQuietFloor).
	{"payloads", "def main(ctx, input):\n  return {\"r\": input.p + input.p}\n", "sync", 3,
		func() any { return map[string]any{"p": strings.Repeat("x", 900_000)} }, http.StatusOK, 3, busyQuietFloor},
	// An async flood: starts as fast as four clients can send them. It too keeps both cores busy
	// with the server's own work (requests, the writer, tiny runs), so the same floor applies: a
	// CI run on a loaded machine measured quiet p99s near 3 ms and loud ones of 9-10 ms three times
	// in a row, where an idle run gives 3.0-3.1x.
	{"asyncflood", "def main(ctx, input):\n  return {\"n\": input.n + 1}\n", "async", 4,
		func() any { return map[string]any{"n": 1} }, http.StatusAccepted, 3, busyQuietFloor},
}

// busyQuietFloor is the least the quiet p99 counts as under loads that keep both cores busy with
// the server's own work (big payloads, an async flood, memory churn), not with user code: on an idle
// 2-core machine the quiet p99 is about 2 ms, less than one slice of the kernel's scheduler, and
// B's calls wait for that slice whenever tenant A's bulky work holds both cores. B's loud p99 was 0.99-1.73 s before the writer took tenants in turn, 0.1-0.33 s
// before documents were packed and bulky requests went through their tenant's lane, 7-17 ms
// since (docs/security.md, "Noisy neighbours: bytes").
const busyQuietFloor = 10 * time.Millisecond

// loadCounts tallies a hostile load's answers.
type loadCounts struct {
	mu                  sync.Mutex
	served, limited, no int
	firstErr            string
}

func (c *loadCounts) add(status, ok int, err error, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil && status == ok:
		c.served++
	case err == nil && status == http.StatusTooManyRequests:
		c.limited++
	default:
		c.no++
		if c.firstErr == "" {
			c.firstErr = fmt.Sprintf("%d %v %.300s", status, err, body)
		}
	}
}

// noisyTenants sets up tenant A (hostile) and B (victim) and registers the selected hostile
// programs and loads, and B's small function.
func noisyTenants(t *testing.T, p *larkProc, selected func(name string) bool) (a, b string, programs, loads []string, small string) {
	p.tenant(t, "hostile")
	p.tenant(t, "victim")
	a = p.token(t, "hostile", "mallory", "developer")
	b = p.token(t, "victim", "bob", "developer")
	p.register(t, a, fnSpec{id: fnPrefix + "vendor.app.hostile.child.v1~", src: "def main(ctx, input):\n  return {}\n"})
	for _, h := range hostilePrograms {
		if selected(h.name) {
			programs = append(programs, p.register(t, a, fnSpec{id: fnPrefix + "vendor.app.hostile." + h.name + ".v1~", src: h.src, limits: h.limits}))
		}
	}
	for _, l := range hostileLoads {
		if selected(l.name) {
			loads = append(loads, p.register(t, a, fnSpec{id: fnPrefix + "vendor.app.hostile." + l.name + ".v1~", src: l.src}))
		} else {
			loads = append(loads, "")
		}
	}
	small = p.register(t, b, fnSpec{id: fnPrefix + "vendor.app.victim.small.v1~", src: "def main(ctx, input):\n  return {\"sum\": input.a + input.b}\n"})
	return a, b, programs, loads, small
}

// runLoads starts tenant A's selected loads (ids[i] "" skips hostileLoads[i]) and returns a stop
// that ends them, waits for their goroutines, and returns their tallies.
func runLoads(p *larkProc, token string, ids []string) (stop func() []*loadCounts) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	counts := make([]*loadCounts, len(hostileLoads))
	for i, l := range hostileLoads {
		counts[i] = &loadCounts{}
		if ids[i] == "" {
			continue
		}
		body := mustJSON(p.t, map[string]any{"entrypoint_id": ids[i], "mode": l.mode, "params": l.params()})
		for range l.threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					status, out, err := send(ctx, p, token, body)
					if ctx.Err() != nil {
						return
					}
					counts[i].add(status, l.ok, err, out)
				}
			}()
		}
	}
	return func() []*loadCounts {
		cancel()
		wg.Wait()
		return counts
	}
}

// send posts an invocation start from a load goroutine (no require: it runs off the test
// goroutine), reads the whole answer as a client would, and returns its status and first bytes.
func send(ctx context.Context, p *larkProc, token string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+apiBase+"/invocations", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	// The first KiB is kept for an error's report; the rest is read and dropped (a big payload's
	// 1.8 MB answer copied into a growing buffer was most of the test process's CPU under -race,
	// which the measuring client shares).
	out, err := io.ReadAll(io.LimitReader(res.Body, 1024))
	if err == nil {
		_, err = io.Copy(io.Discard, res.Body)
	}
	return res.StatusCode, out, err
}

// startPrograms starts each of tenant A's hostile programs twice, async, and returns their ids.
func startPrograms(t *testing.T, p *larkProc, token string, programs []string) []string {
	answers := make([]response, 2*len(programs))
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = p.invoke(t, token, programs[i%len(programs)], "async", nil)
		}()
	}
	wg.Wait()
	started := make([]string, len(answers))
	for i, r := range answers {
		started[i] = record(t, r, http.StatusAccepted).ID
	}
	return started
}

// checkLoads asserts that no call of a load that ran failed but by 429, and that each was served
// (some calls answered as asked) unless tenant A's hostile programs ran too: then its calls may all
// be queued behind A's own CPU-bound programs (a tenant's runnable bound), which is A's to bear.
// It logs the tallies.
func checkLoads(t *testing.T, ids []string, counts []*loadCounts, withPrograms bool) {
	for i, c := range counts {
		if ids[i] == "" {
			continue
		}
		t.Logf("  %s: %d served, %d answered 429", hostileLoads[i].name, c.served, c.limited)
		require.Zero(t, c.no, "%s: calls that failed otherwise than 429 (first: %s)", hostileLoads[i].name, c.firstErr)
		if !withPrograms {
			require.Positive(t, c.served, "%s: no call served", hostileLoads[i].name)
		}
	}
}

// TestNoisyNeighbour runs tenant A's hostile programs (result bomb, CPU loop, log flood, fan-out)
// at once. The environment variable LARK_E2E_HOSTILE_ONLY=<name> runs one kind alone instead
// (payloads and asyncflood included), to see what each costs the neighbour, and
// LARK_E2E_HOSTILE_ONLY=all runs every kind at once, the loads included.
func TestNoisyNeighbour(t *testing.T) {
	only := os.Getenv("LARK_E2E_HOSTILE_ONLY")
	noisyNeighbour(t, func(name string) bool {
		switch only {
		case "":
			return !slices.ContainsFunc(hostileLoads, func(l hostileLoad) bool { return l.name == name })
		case "all":
			return true
		}
		return name == only
	})
}

// TestNoisyNeighbourAsyncFlood runs tenant A's async flood alone, held to 3x.
func TestNoisyNeighbourAsyncFlood(t *testing.T) {
	if os.Getenv("LARK_E2E_HOSTILE_ONLY") != "" {
		t.Skip("LARK_E2E_HOSTILE_ONLY selects the kinds TestNoisyNeighbour runs")
	}
	noisyNeighbour(t, func(name string) bool { return name == "asyncflood" })
}

// TestNoisyNeighbourBigPayloads runs tenant A's big payloads alone, held to 3x (busyQuietFloor).
func TestNoisyNeighbourBigPayloads(t *testing.T) {
	if os.Getenv("LARK_E2E_HOSTILE_ONLY") != "" {
		t.Skip("LARK_E2E_HOSTILE_ONLY selects the kinds TestNoisyNeighbour runs")
	}
	noisyNeighbour(t, func(name string) bool { return name == "payloads" })
}

// noisyNeighbour measures tenant B's small sync calls quiet, then while tenant A runs the selected
// hostile programs and loads, and asserts B's p99 within the goal of the selected kinds and the
// server's RSS growth under 300 MiB.
func noisyNeighbour(t *testing.T, selected func(name string) bool) {
	if testing.Short() {
		t.Skip("noisy neighbour: runs hostile code for several seconds; skipped with -short")
	}
	p := startLark(t, t.TempDir())
	a, b, programs, loads, small := noisyTenants(t, p, selected)
	call := func() time.Duration {
		start := time.Now()
		r := p.invoke(t, b, small, "sync", map[string]any{"a": 1, "b": 2})
		d := time.Since(start)
		rec := record(t, r, http.StatusOK)
		require.Equal(t, "succeeded", rec.Status, "%s", r)
		return d
	}
	// 1,000 calls each side; 300 with big payloads, where B's calls are slower (the run stays
	// within a minute or two).
	n, goal, floor := 1000, 3.0, time.Duration(0)
	for i, id := range loads {
		if id != "" {
			goal, floor = max(goal, hostileLoads[i].goal), max(floor, hostileLoads[i].quietFloor)
			if hostileLoads[i].name == "payloads" {
				n = 300
			}
		}
	}
	for range 20 {
		call() // warm up
	}
	// The loud measurement lasts at least loudFor as well as n calls, so that each of tenant A's
	// loads gets calls through (big payloads queue behind A's own CPU loops when all run at once).
	const loudFor = 3 * time.Second
	measure := func(rss *int64) time.Duration {
		ds := make([]time.Duration, 0, n)
		began := time.Now()
		for len(ds) < n || (rss != nil && time.Since(began) < loudFor) {
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
	// user code interpreted at a lower OS priority, 91x before big payloads were weighed by bytes).
	const attempts = 3
	var ratios []string
	for attempt := 1; ; attempt++ {
		qp := measure(nil)
		baseRSS := rssKB(p.cmd.Process.Pid)
		var started []string
		if len(programs) > 0 {
			started = startPrograms(t, p, a, programs)
		}
		stop := runLoads(p, a, loads)
		var peakRSS int64
		lp := measure(&peakRSS)
		counts := stop()
		base := max(qp, floor)
		ratio := float64(lp) / float64(base)
		ratios = append(ratios, fmt.Sprintf("%.1fx", ratio))
		t.Logf("attempt %d: tenant B sync p99: quiet %v, with tenant A's hostile load %v (%.1fx); RSS %d MiB before, peak %d MiB",
			attempt, qp, lp, ratio, baseRSS/1024, peakRSS/1024)
		checkLoads(t, loads, counts, len(programs) > 0)
		if peakRSS > 0 {
			require.Less(t, peakRSS-baseRSS, int64(300*1024), "server RSS growth under 300 MiB")
		}
		// Measured 1.8-2.3x on a 2-core machine (docs/security.md, "Noisy neighbours").
		if ratio <= goal {
			return
		}
		require.Less(t, attempt, attempts, "tenant B's p99 within %.0fx of its quiet p99 in one of %d measurements: %v", goal, attempts, ratios)
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
