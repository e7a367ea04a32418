package e2e

import (
	"encoding/json"
	"fmt"
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
	crashFnID       = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.crash.post_counter.v1~"
	crashTotal      = 500              // async invocations the test tries to submit
	crashSubmitters = 16               // concurrent submitting clients
	crashWorkers    = "16"             // --workers of the server
	crashDeadline   = 90 * time.Second // after the restart, until every accepted invocation is terminal
	crashUpstreamMS = 50               // the counter's answer delay: keeps attempts in flight at the kill
)

var terminalStatuses = map[string]bool{"succeeded": true, "failed": true, "dead_lettered": true, "canceled": true}

// postCounter is the upstream the function calls: it records every POST by the id in its body.
type postCounter struct {
	mu       sync.Mutex
	byID     map[string]int
	calls    int // every POST, including ones without a usable id
	bad      []string
	inFlight atomic.Int64 // requests being answered (each is held crashUpstreamMS)
}

func (c *postCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID string `json:"id"`
	}
	err := json.NewDecoder(r.Body).Decode(&body)
	c.mu.Lock()
	c.calls++
	switch {
	case r.Method != http.MethodPost:
		c.bad = append(c.bad, r.Method+" "+r.URL.Path)
	case err != nil || body.ID == "":
		c.bad = append(c.bad, fmt.Sprintf("POST without an id (%v)", err))
	default:
		c.byID[body.ID]++
	}
	c.mu.Unlock()
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	time.Sleep(crashUpstreamMS * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
}

func (c *postCounter) snapshot() (map[string]int, int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.byID))
	for k, v := range c.byID {
		m[k] = v
	}
	return m, c.calls, append([]string(nil), c.bad...)
}

// crashFunction is the registration body: an async function with a 2 s timeout whose one side
// effect is a POST of its invocation id to url. max_attempts 1, so that an upstream call repeated
// for one invocation can only come from a re-dispatch after the crash.
func crashFunction(t testing.TB, url string) []byte {
	t.Helper()
	src := fmt.Sprintf("def main(ctx, input):\n"+
		"  r_await(r_http_post_v1(%q, {\"id\": ctx.invocation_id}, timeout_ms=1000))\n"+
		"  return {\"ok\": True}\n", url)
	return mustJSON(t, map[string]any{
		"entrypoint_id": crashFnID,
		"title":         "Crash probe",
		"description":   "Posts its invocation id to a counter once.",
		"owner":         map[string]any{"owner_type": "tenant"},
		"schema":        map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []any{"async"}, "default": "async"},
			"limits":     map[string]any{"timeout_seconds": 2},
			"retry":      map[string]any{"max_attempts": 1},
		},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
			"code": map[string]any{"language": "starlark", "source": src}},
	})
}

type invocationItem struct {
	ID     string `json:"invocation_id"`
	Status string `json:"status"`
	Error  *struct {
		TypeID  string `json:"error_type_id"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestCrashAsyncInvocations submits 500 async invocations, kills -9 the server once about half have
// run (with attempts in flight), restarts it on the same data directory, and checks that all 500
// end terminal, none is lost, none succeeds twice, and each success's side effect happened at least
// once.
func TestCrashAsyncInvocations(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: starts, kills and restarts the server and waits out a lease (~40 s); skipped with -short")
	}
	testStart := time.Now()
	counter := &postCounter{byID: map[string]int{}}
	upstream := httptest.NewServer(counter) // 127.0.0.1: reachable through --unsafe-egress-allow-loopback
	t.Cleanup(upstream.Close)

	data := t.TempDir()
	flags := []string{"--unsafe-egress-allow-loopback", "--workers", crashWorkers}
	p := startLark(t, data, flags...)

	var ep struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, crashFunction(t, upstream.URL+"/effects")), http.StatusCreated, &ep)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints/"+crashFnID+":status", p.Token, []byte(`{"action":"activate"}`)), http.StatusOK, &ep)
	require.Equal(t, "active", ep.Status)

	// Submit all of them with bounded concurrency; the dispatcher starts running them meanwhile.
	client := poolClient(crashSubmitters)
	defer client.CloseIdleConnections()
	var (
		mu         sync.Mutex
		accepted   []string     // invocation ids answered 202
		unexpected []string     // failures before the kill
		next       atomic.Int64 // next request index
		nAccepted  atomic.Int64 // len(accepted)
		stopping   atomic.Bool  // set just before the kill: later transport errors are expected
		wg         sync.WaitGroup
		afterKill  atomic.Int64 // requests that failed because of the kill
	)
	submitStart := time.Now()
	for w := 0; w < crashSubmitters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopping.Load() {
				i := next.Add(1) - 1
				if i >= crashTotal {
					return
				}
				body := fmt.Appendf(nil, `{"entrypoint_id":%q,"mode":"async","params":{"n":%d}}`, crashFnID, i)
				r, err := p.try(client, http.MethodPost, apiBase+"/invocations", p.Token, body)
				if err != nil {
					if stopping.Load() {
						afterKill.Add(1)
					} else {
						mu.Lock()
						unexpected = append(unexpected, fmt.Sprintf("request %d: %v", i, err))
						mu.Unlock()
					}
					return
				}
				var res struct {
					Record invocationItem `json:"record"`
				}
				if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &res) != nil || res.Record.ID == "" {
					mu.Lock()
					unexpected = append(unexpected, fmt.Sprintf("request %d: %s", i, r))
					mu.Unlock()
					return
				}
				mu.Lock()
				accepted = append(accepted, res.Record.ID)
				mu.Unlock()
				nAccepted.Add(1)
			}
		}()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(60 * time.Second):
		t.Fatal("the 500 submissions did not finish within 60 s")
	}
	require.Empty(t, unexpected, "submissions failed before the kill")
	require.Len(t, accepted, crashTotal, "every submission accepted before the crash")
	// Kill midway: once about half have had their side effect...
	waitHalf := time.Now()
	for time.Since(waitHalf) < 60*time.Second {
		if _, calls, _ := counter.snapshot(); calls >= crashTotal/2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// ...and while at least one attempt is inside its upstream call (it holds a lease and has had
	// its side effect), so that the crash always cuts a running attempt; bounded, in case none comes.
	waitInFlight := time.Now()
	for counter.inFlight.Load() == 0 && time.Since(waitInFlight) < 2*time.Second {
		time.Sleep(time.Millisecond)
	}
	upstreamAtKill := counter.inFlight.Load()
	stopping.Store(true)
	acceptedAtKillSignal := nAccepted.Load()
	killAt := time.Now()
	p.Kill()
	submitTime := killAt.Sub(submitStart)

	mu.Lock()
	require.Empty(t, unexpected, "submissions failed before the kill")
	acceptedIDs := append([]string(nil), accepted...)
	mu.Unlock()
	require.Len(t, acceptedIDs, crashTotal)
	seen := map[string]bool{}
	for _, id := range acceptedIDs {
		require.False(t, seen[id], "invocation id %s answered twice", id)
		seen[id] = true
	}
	preCrash, preCalls, _ := counter.snapshot()
	t.Logf("submitted %d requests in %v; %d accepted (202) — %d when the kill was decided; %d requests failed at the kill; "+
		"%d upstream calls in progress at the kill; upstream had %d POSTs for %d ids before the restart",
		min(next.Load(), crashTotal), submitTime.Round(time.Millisecond), len(acceptedIDs), acceptedAtKillSignal, afterKill.Load(),
		upstreamAtKill, preCalls, len(preCrash))
	if len(acceptedIDs) == crashTotal {
		t.Logf("note: every submission was accepted before the kill; the crash cut executions only, no submissions")
	}

	// Restart on the same data directory and wait until every accepted invocation is terminal.
	q := startLark(t, data, flags...)
	restarted := time.Now()
	require.Equal(t, p.Token, q.Token, "LARK_TOKEN must survive the crash")
	byID := waitAllTerminal[invocationItem](t, q, acceptedIDs, restarted, crashDeadline, nil)
	recovery := time.Since(restarted)
	recoveryFromKill := time.Since(killAt)

	// The event log of each accepted invocation: exactly one succeeded event per success, none
	// otherwise; the side effect at least once per success; repeats only where the attempt was
	// re-dispatched after the crash (reclaimed).
	posts, calls, bad := counter.snapshot()
	require.Empty(t, bad, "unexpected upstream calls")
	statuses := map[string]int{}
	var duplicates, dupInvocations, reclaimed, lateResults int
	var failures []string
	for _, id := range acceptedIDs {
		it := byID[id]
		statuses[it.Status]++
		var tl struct {
			Status string `json:"status"`
			Items  []struct {
				EventType string `json:"event_type"`
			} `json:"items"`
		}
		requireJSON(t, q.do(http.MethodGet, apiBase+"/invocations/"+id+"/timeline?limit=200", q.Token, nil), http.StatusOK, &tl)
		count := map[string]int{}
		var types []string
		for _, ev := range tl.Items {
			count[ev.EventType]++
			types = append(types, ev.EventType)
		}
		require.Equal(t, it.Status, tl.Status, "%s: timeline status", id)
		if it.Status == "succeeded" {
			require.Equal(t, 1, count["succeeded"], "%s succeeded %d times: %v", id, count["succeeded"], types)
			require.GreaterOrEqual(t, posts[id], 1, "%s succeeded but its upstream side effect never happened: %v", id, types)
		} else {
			require.Zero(t, count["succeeded"], "%s is %s but its log has succeeded: %v", id, it.Status, types)
			msg := ""
			if it.Error != nil {
				msg = it.Error.TypeID + ": " + it.Error.Message
			}
			failures = append(failures, fmt.Sprintf("%s %s (%s) %v", id, it.Status, msg, types))
		}
		require.Equal(t, 1, count["created"], "%s: %v", id, types)
		if count["reclaimed"] > 0 {
			reclaimed++
		}
		lateResults += count["late_result"]
		if n := posts[id]; n > 1 {
			duplicates += n - 1
			dupInvocations++
			require.Positive(t, count["reclaimed"], "%s: %d upstream POSTs without a re-dispatch after the crash: %v", id, n, types)
		}
	}
	// Invocations the server created whose 202 never reached the client (cut by the kill).
	unacknowledged := 0
	for id := range byID {
		if !seen[id] {
			unacknowledged++
		}
	}
	strays := 0
	for id := range posts {
		if _, ok := byID[id]; !ok {
			strays++
		}
	}
	require.Zero(t, strays, "upstream POSTs for invocation ids the server does not know")
	sort.Strings(failures)
	if len(failures) > 0 {
		t.Logf("accepted invocations that did not succeed (%d):\n%s", len(failures), strings.Join(failures[:min(20, len(failures))], "\n"))
	}
	t.Logf("accepted %d; after recovery: %v; re-dispatched after the lease (reclaimed) %d; late results %d; "+
		"created but unacknowledged %d; upstream POSTs %d for %d ids; duplicate side effects %d (on %d invocations, all re-dispatched after the crash); "+
		"recovery %v after the restart (%v after the kill); test %v",
		len(acceptedIDs), statuses, reclaimed, lateResults, unacknowledged, calls, len(posts), duplicates, dupInvocations,
		recovery.Round(time.Millisecond), recoveryFromKill.Round(time.Millisecond), time.Since(testStart).Round(time.Millisecond))

	q.Stop() // and it still shuts down cleanly
}
