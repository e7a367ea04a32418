package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	wfCrashID         = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.orders.crash_wf.v1~"
	wfCrashTotal      = 1000              // async workflow invocations, all accepted before the first kill
	wfCrashSteps      = 5                 // steps per workflow: s1..s5, one upstream POST each
	wfCrashSubmitters = 16                // concurrent submitting clients
	wfCrashWorkers    = "32"              // --workers of the server
	wfCrashKills      = 5                 // kill -9 / restart cycles
	wfCrashDeadline   = 150 * time.Second // after the last restart, until every invocation is terminal
	wfCrashUpstreamMS = 100               // the counter's answer delay: keeps steps in flight at each kill
)

// wfCounter is the upstream the workflow's steps call: it records every POST by the "key" in its
// body (<invocation_id>/<step>).
type wfCounter struct {
	mu       sync.Mutex
	byKey    map[string]int
	bad      []string
	calls    atomic.Int64 // every POST, including ones without a usable key
	inFlight atomic.Int64 // requests being answered (each is held wfCrashUpstreamMS)
}

func (c *wfCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Key string `json:"key"`
	}
	err := json.NewDecoder(r.Body).Decode(&body)
	c.mu.Lock()
	switch {
	case r.Method != http.MethodPost:
		c.bad = append(c.bad, r.Method+" "+r.URL.Path)
	case err != nil || body.Key == "":
		c.bad = append(c.bad, fmt.Sprintf("POST without a key (%v)", err))
	default:
		c.byKey[body.Key]++
	}
	c.mu.Unlock()
	c.calls.Add(1)
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	time.Sleep(wfCrashUpstreamMS * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
}

func (c *wfCounter) snapshot() (map[string]int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.byKey))
	for k, v := range c.byKey {
		m[k] = v
	}
	return m, append([]string(nil), c.bad...)
}

// wfCrashWorkflow is the registration body: an async workflow (max_attempts 1, 5 s runs) running
// five steps, each of which POSTs "<invocation_id>/<step>" to url once.
func wfCrashWorkflow(t testing.TB, url string) []byte {
	t.Helper()
	var src strings.Builder
	fmt.Fprintf(&src, "def step(ctx, input):\n"+
		"  return r_await(r_http_post_v1(%q, {\"key\": ctx.invocation_id + \"/\" + input}, timeout_ms=3000)).response.status_code\n\n"+
		"def main(ctx, input):\n", url)
	for i := 1; i <= wfCrashSteps; i++ {
		fmt.Fprintf(&src, "  r_run_step_v1(\"s%d\", step, \"s%d\")\n", i, i)
	}
	src.WriteString("  return {\"ok\": True}\n")
	return mustJSON(t, map[string]any{
		"entrypoint_id": wfCrashID,
		"title":         "Workflow crash probe",
		"description":   "Five steps, each posting its invocation id and step name to a counter.",
		"owner":         map[string]any{"owner_type": "tenant"},
		"schema":        map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []any{"async"}, "default": "async"},
			"limits":     map[string]any{"timeout_seconds": 5},
			"retry":      map[string]any{"max_attempts": 1},
			"workflow": map[string]any{
				"compensation":        map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing":       map[string]any{"strategy": "automatic"},
				"max_suspension_days": 30,
			},
		},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
			"code": map[string]any{"language": "starlark", "source": src.String()}},
	})
}

type wfCrashItem struct {
	ID     string          `json:"invocation_id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		TypeID  string `json:"error_type_id"`
		Message string `json:"message"`
	} `json:"error"`
}

type wfTimeline struct {
	Status string `json:"status"`
	Items  []struct {
		EventType string  `json:"event_type"`
		StepName  *string `json:"step_name"`
	} `json:"items"`
}

// wfKill is one kill -9 / restart cycle.
type wfKill struct {
	ranFor     time.Duration // since the (re)start that was killed
	callsAt    int64         // upstream POSTs so far when killed
	inFlightAt int64         // upstream POSTs being answered when killed
	startup    time.Duration // kill until the restarted server printed its export lines
}

// TestCrashWorkflows submits 1,000 five-step async workflows, kills -9 the server at least five
// times at random moments while they run, restarting it on the same data directory each time, and
// checks that all 1,000 succeed with each step journaled complete exactly once and every step's
// side effect seen at least once (repeats are the in-flight runs cut by a kill, re-dispatched after
// their lease).
func TestCrashWorkflows(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: kills and restarts the server repeatedly and waits out leases (~1 min); skipped with -short")
	}
	testStart := time.Now()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t.Logf("random seed %d", seed)

	counter := &wfCounter{byKey: map[string]int{}}
	upstream := httptest.NewServer(counter) // 127.0.0.1: reachable through --unsafe-egress-allow-loopback
	t.Cleanup(upstream.Close)

	data := t.TempDir()
	flags := []string{"--unsafe-egress-allow-loopback", "--workers", wfCrashWorkers}
	p := startLark(t, data, flags...)

	var ep struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, wfCrashWorkflow(t, upstream.URL+"/effects")), http.StatusCreated, &ep)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints/"+wfCrashID+":status", p.Token, []byte(`{"action":"activate"}`)), http.StatusOK, &ep)
	require.Equal(t, "active", ep.Status)

	// Submit all of them with bounded concurrency; the dispatcher starts running them meanwhile.
	client := poolClient(wfCrashSubmitters)
	defer client.CloseIdleConnections()
	var (
		mu       sync.Mutex
		accepted []string
		failures []string
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	submitStart := time.Now()
	for w := 0; w < wfCrashSubmitters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= wfCrashTotal {
					return
				}
				body := fmt.Appendf(nil, `{"entrypoint_id":%q,"mode":"async","params":{"n":%d}}`, wfCrashID, i)
				r, err := p.try(client, http.MethodPost, apiBase+"/invocations", p.Token, body)
				var res struct {
					Record wfCrashItem `json:"record"`
				}
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("request %d: %v", i, err))
				case r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &res) != nil || res.Record.ID == "":
					failures = append(failures, fmt.Sprintf("request %d: %s", i, r))
				default:
					accepted = append(accepted, res.Record.ID)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	submitTime := time.Since(submitStart)
	require.Empty(t, failures, "submissions failed")
	require.Len(t, accepted, wfCrashTotal, "every submission accepted before the first kill")
	seen := make(map[string]bool, len(accepted))
	for _, id := range accepted {
		require.False(t, seen[id], "invocation id %s answered twice", id)
		seen[id] = true
	}
	callsAtSubmit := counter.calls.Load()
	t.Logf("submitted and accepted %d workflows in %v (upstream had %d POSTs by then)",
		wfCrashTotal, submitTime.Round(time.Millisecond), callsAtSubmit)

	// Kill -9 at random moments while the workflows run, restarting on the same data directory.
	// Each cycle runs a random 200–800 ms, and at least until the counter has advanced since the
	// (re)start (bounded), so that every kill cuts running workflows.
	token := p.Token
	var kills []wfKill
	firstKill := time.Now()
	started := time.Now() // the first cycle's random run time counts from the end of the submission
	for k := 0; k < wfCrashKills; k++ {
		runFor := time.Duration(200+rng.IntN(601)) * time.Millisecond
		callsAtStart := counter.calls.Load()
		for time.Since(started) < runFor || (counter.calls.Load() == callsAtStart && time.Since(started) < 10*time.Second) {
			time.Sleep(5 * time.Millisecond)
		}
		kw := wfKill{ranFor: time.Since(started), callsAt: counter.calls.Load(), inFlightAt: counter.inFlight.Load()}
		killAt := time.Now()
		if k == 0 {
			firstKill = killAt
		}
		p.Kill()
		client.CloseIdleConnections()
		p = startLark(t, data, flags...)
		started = time.Now()
		kw.startup = started.Sub(killAt)
		require.Equal(t, token, p.Token, "LARK_TOKEN must survive kill -9")
		kills = append(kills, kw)
		t.Logf("kill %d: after %v of running, %d upstream POSTs so far (%d since the (re)start), %d in flight; restarted in %v",
			k+1, kw.ranFor.Round(time.Millisecond), kw.callsAt, kw.callsAt-callsAtStart, kw.inFlightAt, kw.startup.Round(time.Millisecond))
		require.Positive(t, kw.callsAt-callsAtStart, "kill %d: no workflow made progress between the (re)start and the kill", k+1)
	}
	lastRestart := started

	// Wait until every accepted invocation is terminal (in-flight runs come back after their lease:
	// timeout 5 s + 30 s grace).
	lastLog := time.Now()
	byID := waitAllTerminal[wfCrashItem](t, p, accepted, lastRestart, wfCrashDeadline, func(pending int) {
		if time.Since(lastLog) > 10*time.Second {
			t.Logf("%v after the last restart: %d not terminal yet; %d upstream POSTs", time.Since(lastRestart).Round(time.Second), pending, counter.calls.Load())
			lastLog = time.Now()
		}
	})
	recovery := time.Since(lastRestart)
	recoveryFromFirstKill := time.Since(firstKill)

	// Every invocation's timeline, fetched with bounded concurrency.
	timelines := make([]wfTimeline, len(accepted))
	tlErrs := make([]string, len(accepted))
	var tnext atomic.Int64
	for w := 0; w < wfCrashSubmitters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(tnext.Add(1) - 1)
				if i >= len(accepted) {
					return
				}
				r, err := p.try(client, http.MethodGet, apiBase+"/invocations/"+accepted[i]+"/timeline?limit=200", p.Token, nil)
				switch {
				case err != nil:
					tlErrs[i] = err.Error()
				case r.Status != http.StatusOK:
					tlErrs[i] = r.String()
				default:
					if err := json.Unmarshal(r.Body, &timelines[i]); err != nil {
						tlErrs[i] = err.Error()
					}
				}
			}
		}()
	}
	wg.Wait()

	posts, bad := counter.snapshot()
	require.Empty(t, bad, "unexpected upstream calls")
	statuses := map[string]int{}
	var notSucceeded []string
	var reclaimed, lateResults, repeatedKeys, extraPosts, repeatedInvocations, multiRepeat int
	repeatsByStep := map[string]int{}
	for i, id := range accepted {
		require.Empty(t, tlErrs[i], "%s: timeline", id)
		it, tl := byID[id], timelines[i]
		statuses[it.Status]++
		require.Equal(t, it.Status, tl.Status, "%s: timeline status", id)
		counts := map[string]int{}
		var types, steps []string
		for _, ev := range tl.Items {
			counts[ev.EventType]++
			types = append(types, ev.EventType)
			if ev.EventType == "step_completed" {
				require.NotNil(t, ev.StepName, "%s: step_completed without a step_name: %v", id, types)
				steps = append(steps, *ev.StepName)
			}
		}
		if it.Status != "succeeded" {
			msg := ""
			if it.Error != nil {
				msg = it.Error.TypeID + ": " + it.Error.Message
			}
			notSucceeded = append(notSucceeded, fmt.Sprintf("%s %s (%s) %v", id, it.Status, msg, types))
			continue
		}
		require.JSONEq(t, `{"ok":true}`, string(it.Result), "%s: result", id)
		require.Equal(t, 1, counts["succeeded"], "%s succeeded %d times: %v", id, counts["succeeded"], types)
		require.Zero(t, counts["step_failed"], "%s: %v", id, types)
		// Exactly s1..s5, each journaled complete once, in order.
		want := make([]string, wfCrashSteps)
		for s := range want {
			want[s] = fmt.Sprintf("s%d", s+1)
		}
		require.Equal(t, want, steps, "%s: step_completed entries (a step journaled complete twice, or missing): %v", id, types)
		if counts["reclaimed"] > 0 {
			reclaimed++
		}
		lateResults += counts["late_result"]
		repeated := 0
		for _, s := range want {
			key := id + "/" + s
			n := posts[key]
			require.GreaterOrEqual(t, n, 1, "%s completed step %s but its side effect never reached the upstream: %v", id, s, types)
			if n > 1 {
				repeatedKeys++
				extraPosts += n - 1
				repeatsByStep[s]++
				repeated++
			}
		}
		if repeated > 1 {
			multiRepeat++
		}
		// Each journal entry is durable before the next step starts, so a crash repeats at most the
		// step in flight: no more repeated steps than re-dispatches.
		require.LessOrEqual(t, repeated, counts["reclaimed"], "%s: %d steps repeated after %d re-dispatches: %v", id, repeated, counts["reclaimed"], types)
		if repeated > 0 {
			repeatedInvocations++
			require.Positive(t, counts["reclaimed"], "%s: a step's side effect repeated without a re-dispatch after a crash: %v", id, types)
		}
	}
	sort.Strings(notSucceeded)
	require.Empty(t, notSucceeded, "%d of %d workflows did not succeed, e.g.:\n%s", len(notSucceeded), len(accepted),
		strings.Join(notSucceeded[:min(20, len(notSucceeded))], "\n"))
	strays := 0
	for key := range posts {
		id, _, _ := strings.Cut(key, "/")
		if !seen[id] {
			strays++
		}
	}
	require.Zero(t, strays, "upstream POSTs for invocation ids that were never accepted")
	require.Len(t, posts, wfCrashTotal*wfCrashSteps, "distinct upstream keys")

	var startups []string
	for _, k := range kills {
		startups = append(startups, k.startup.Round(time.Millisecond).String())
	}
	t.Logf("%d kills; restart times (kill → ready) %v; statuses %v; re-dispatched after a lease (reclaimed) %d; late results %d",
		len(kills), startups, statuses, reclaimed, lateResults)
	t.Logf("upstream POSTs %d for %d keys: %d keys repeated (%d extra POSTs) on %d invocations, by step %v — "+
		"all on invocations re-dispatched after a crash; no step journaled complete twice",
		counter.calls.Load(), len(posts), repeatedKeys, extraPosts, repeatedInvocations, repeatsByStep)
	if multiRepeat > 0 {
		t.Logf("note: %d invocations repeated more than one step's side effect (each was re-dispatched more than once)", multiRepeat)
	}
	t.Logf("recovery: all %d terminal %v after the last restart (%v after the first kill); submission %v; test %v",
		wfCrashTotal, recovery.Round(time.Millisecond), recoveryFromFirstKill.Round(time.Millisecond),
		submitTime.Round(time.Millisecond), time.Since(testStart).Round(time.Millisecond))

	p.Stop() // and it still shuts down cleanly
}
