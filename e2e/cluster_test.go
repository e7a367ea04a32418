package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

const (
	clusterNodes      = 3
	clusterAsync      = 5000 // async invocations (the count; ~80 s in all on a 2-core machine)
	clusterWorkflows  = 500  // five-step workflows (the count)
	clusterSchedules  = 5    // every-second schedules
	clusterSubmitters = 16
	clusterWorkers    = "16" // --workers of each node
	clusterUpstreamMS = 20
	// clusterWorkflowTimeout is the workflow's timeout_seconds; a run cut by the kill is reclaimed
	// this plus 30 s (the lease grace) after its last lease renewal.
	clusterWorkflowTimeout = 15
	clusterDeadline        = 120 * time.Second // after the kill, until every accepted invocation is terminal
	clusterLeaderTTL       = 5 * time.Second
	clusterRenew           = time.Second
	// clusterSlack is what the measured failover may exceed TTL + Renew by: the new leader's claim is
	// one group-committed write, and the test sees it by polling every 20 ms.
	clusterSlack = time.Second
	// clusterWorkerProcs remote workers (lark worker) poll every node and run the async functions;
	// each runs clusterWorkerSlots at once. Their heartbeat timeout bounds how long a killed
	// worker's tasks wait before their leases are ended and the attempts reclaimed.
	clusterWorkerProcs = 2
	clusterWorkerSlots = "16"
	clusterHBInterval  = "500ms"
	clusterHBTimeout   = "3s"
)

// clusterCounter is the upstream of the functions and workflow steps: it counts POSTs by the "id"
// (async function) or "key" (workflow step: <invocation>/<step>) in their body.
type clusterCounter struct {
	mu    sync.Mutex
	by    map[string]int
	bad   []string
	calls atomic.Int64
}

func (c *clusterCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	err := json.NewDecoder(r.Body).Decode(&body)
	c.calls.Add(1)
	c.mu.Lock()
	switch k := body.ID + body.Key; {
	case err != nil || k == "":
		c.bad = append(c.bad, fmt.Sprintf("%s %s without an id (%v)", r.Method, r.URL.Path, err))
	default:
		c.by[k]++
	}
	c.mu.Unlock()
	time.Sleep(clusterUpstreamMS * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
}

func (c *clusterCounter) snapshot() (map[string]int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.by))
	for k, v := range c.by {
		m[k] = v
	}
	return m, append([]string(nil), c.bad...)
}

// leaderLease reads the leader lease's holder and term from the nodes' schema.
func leaderLease(t *testing.T, conn *pgx.Conn) (holder string, term int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	err := conn.QueryRow(ctx, `SELECT holder, term FROM leader_leases WHERE name = 'singletons'`).Scan(&holder, &term)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0
	}
	require.NoError(t, err)
	return holder, term
}

// TestClusterFailover: three `lark dev` nodes (lark serve plus the dev tenant, sharing one data
// directory for its credentials and master key) on one PostgreSQL schema, with two `lark worker`
// processes polling all three that run the async functions, run 5,000 async invocations, 500
// five-step workflows (on the nodes) and five every-second schedules, submitted round-robin to the
// three; once a quarter of the side effects happened, while submissions go on, the leader and one
// worker are killed with -9 (the requests the leader cut are sent again to another node), then
// both are restarted (the node on its address). Every accepted invocation ends succeeded, each
// exactly once in its log; a side effect repeats only for an invocation re-dispatched after the
// kill (reclaimed); every workflow step is journaled complete once; no scheduled instant is
// recorded twice nor has two invocations; another node leads within the failover bound
// (TTL + Renew), measured; schedules keep firing after it.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: three nodes, a kill -9 and a lease to wait out; skipped with -short")
	}
	url := pgtest.Schema(t) // skips, saying so, without LARK_TEST_POSTGRES_URL
	testStart := time.Now()
	counter := &clusterCounter{by: map[string]int{}}
	upstream := httptest.NewServer(counter)
	t.Cleanup(upstream.Close)

	data := t.TempDir()
	// Fixed addresses: a restarted node comes back where the workers poll it.
	addrs := make([]string, clusterNodes)
	for i := range addrs {
		addrs[i] = freeAddr(t)
	}
	flags := func(i int) []string {
		return []string{"--store", url, "--unsafe-egress-allow-loopback", "--workers", clusterWorkers, "--node-id", fmt.Sprintf("n%d", i+1),
			"--leader-ttl", clusterLeaderTTL.String(), "--leader-renew", clusterRenew.String(), "--addr", addrs[i],
			"--remote-workers", "--worker-key", e2eWorkerKey, "--worker-heartbeat-interval", clusterHBInterval, "--worker-heartbeat-timeout", clusterHBTimeout}
	}
	nodes := make([]*larkProc, clusterNodes)
	urls := make([]string, clusterNodes)
	for i := range nodes {
		nodes[i] = startLark(t, data, flags(i)...) // in turn: the first provisions the dev tenant
		urls[i] = nodes[i].URL
	}
	workerFlags := []string{"--concurrency", clusterWorkerSlots, "--unsafe-egress-allow-loopback"}
	workers := make([]*workerProc, clusterWorkerProcs)
	for i := range workers {
		workers[i] = startWorker(t, strings.Join(urls, ","), workerFlags...)
	}
	p := nodes[0]
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)

	// Register the function, the workflow and the tick function, and the schedules.
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, crashFunction(t, upstream.URL+"/effects")), http.StatusCreated, nil)
	// The workflow of TestCrashWorkflows with a longer timeout: three nodes, PostgreSQL and the test
	// share the machine's cores, and a five-step run queued behind thousands may take over 5 s.
	var wf map[string]any
	require.NoError(t, json.Unmarshal(wfCrashWorkflow(t, upstream.URL+"/steps"), &wf))
	wf["traits"].(map[string]any)["limits"] = map[string]any{"timeout_seconds": clusterWorkflowTimeout}
	wfBody, err := json.Marshal(wf)
	require.NoError(t, err)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, wfBody), http.StatusCreated, nil)
	tick := fmt.Appendf(nil, `{"entrypoint_id":%q,"title":"tick","owner":{"owner_type":"tenant"},
		"schema":{"params":{"type":"object"},"returns":{"type":"object"}},
		"traits":{"invocation":{"supported":["async"],"default":"async"},"limits":{"timeout_seconds":5},"retry":{"max_attempts":1}},
		"implementation":{"adapter":"gts.x.core.serverless.adapter.starlark.v1~","kind":"code",
		"code":{"language":"starlark","source":"def main(ctx, input):\n  return {\"ok\": True}\n"}}}`, schCrashFn)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, tick), http.StatusCreated, nil)
	for _, id := range []string{crashFnID, wfCrashID, schCrashFn} {
		requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints/"+id+":status", p.Token, []byte(`{"action":"activate"}`)), http.StatusOK, nil)
	}
	schedulesFrom := time.Now().UTC()
	for i := range clusterSchedules {
		body := fmt.Appendf(nil, `{"schedule_id":"tick%02d","entrypoint_id":%q,"expression":{"kind":"cron","value":"* * * * * *"}}`, i, schCrashFn)
		requireJSON(t, nodes[i%clusterNodes].do(http.MethodPost, apiBase+"/schedules", p.Token, body), http.StatusCreated, nil)
	}

	// The leader: one of the three, holding the lease.
	var oldLeader string
	for deadline := time.Now().Add(10 * time.Second); oldLeader == ""; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "no node took the leader lease")
		oldLeader, _ = leaderLease(t, conn)
	}
	var li int
	_, err = fmt.Sscanf(oldLeader, "n%d", &li)
	require.NoError(t, err, "leader %q", oldLeader)
	require.True(t, li >= 1 && li <= clusterNodes, "leader %q is not one of the nodes", oldLeader)
	leaderNode := li - 1

	// Submit everything round-robin to the three nodes; the leader is killed while they submit, and
	// from then on the requests go to the two others (one cut by the kill is sent again to another).
	total := clusterAsync + clusterWorkflows
	client := poolClient(clusterSubmitters)
	defer client.CloseIdleConnections()
	var (
		mu         sync.Mutex
		accepted   []string
		workflows  = map[string]bool{}
		unexpected []string
		next       atomic.Int64
		wg         sync.WaitGroup
		dead       atomic.Int32 // the killed node's index, -1 before the kill
		resent     atomic.Int64 // requests cut by the kill and sent again
	)
	dead.Store(-1)
	pick := func(k int) *larkProc {
		if k%clusterNodes == int(dead.Load()) {
			k++
		}
		return nodes[k%clusterNodes]
	}
	submitStart := time.Now()
	for range clusterSubmitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				ep, wf := crashFnID, false
				if i%(total/clusterWorkflows) == 0 && i/(total/clusterWorkflows) < clusterWorkflows {
					ep, wf = wfCrashID, true
				}
				node := pick(i)
				body := fmt.Appendf(nil, `{"entrypoint_id":%q,"mode":"async","params":{"n":%d}}`, ep, i)
				r, err := node.try(client, http.MethodPost, apiBase+"/invocations", node.Token, body)
				if err != nil && dead.Load() >= 0 {
					resent.Add(1)
					node = pick(i + 1)
					r, err = node.try(client, http.MethodPost, apiBase+"/invocations", node.Token, body)
				}
				var res struct {
					Record invocationItem `json:"record"`
				}
				mu.Lock()
				switch {
				case err != nil:
					unexpected = append(unexpected, fmt.Sprintf("request %d: %v", i, err))
				case r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &res) != nil || res.Record.ID == "":
					unexpected = append(unexpected, fmt.Sprintf("request %d: %s", i, r))
				default:
					accepted = append(accepted, res.Record.ID)
					workflows[res.Record.ID] = wf
				}
				mu.Unlock()
			}
		}()
	}
	// Kill the leader once a quarter of the side effects happened: it cuts submissions and executions
	// on the leader, whose leases the others take back.
	wantCalls := int64(clusterAsync+clusterWorkflows*wfCrashSteps) / 4
	for deadline := time.Now().Add(90 * time.Second); counter.calls.Load() < wantCalls; time.Sleep(5 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "a quarter of the work did not run within 90 s")
	}
	_, termBefore := leaderLease(t, conn)
	dead.Store(int32(leaderNode))
	submittedAtKill := next.Load()
	killAt := time.Now()
	nodes[leaderNode].Kill()
	require.NoError(t, workers[0].cmd.Process.Kill())
	callsAtKill := counter.calls.Load()
	workers[0].wait(t)

	// Another node leads within TTL + Renew of the kill (the lease's last renewal came before it).
	var newLeader string
	var failover time.Duration
	for {
		h, term := leaderLease(t, conn)
		if h != oldLeader && h != "" {
			failover = time.Since(killAt)
			newLeader = h
			require.Greater(t, term, termBefore, "the term moves with the holder")
			break
		}
		require.Less(t, time.Since(killAt), clusterLeaderTTL+clusterRenew+clusterSlack+5*time.Second, "no node took over from the killed leader")
		time.Sleep(20 * time.Millisecond)
	}
	bound := clusterLeaderTTL + clusterRenew
	t.Logf("leader %s killed; %s leads %v later (bound TTL + Renew = %v, slack %v)", oldLeader, newLeader, failover.Round(time.Millisecond), bound, clusterSlack)
	require.LessOrEqual(t, failover, bound+clusterSlack, "failover exceeded the stated bound")

	// Restart the killed node; it rejoins as a follower (the submitters keep to the two others).
	restarted := startLark(t, data, flags(leaderNode)...)
	workers[0] = startWorker(t, strings.Join(urls, ","), workerFlags...)
	live := nodes[(leaderNode+1)%clusterNodes]
	wg.Wait()
	submitTime := time.Since(submitStart)
	require.Empty(t, unexpected, "submissions failed (after the kill: on the other node too)")
	require.Len(t, accepted, total, "every request accepted, by its node or (cut by the kill) by another")
	nodes[leaderNode] = restarted

	byID := waitAllTerminal[wfCrashItem](t, live, accepted, killAt, clusterDeadline, nil)
	recovery := time.Since(killAt)

	// Every invocation succeeded once; side effects repeat only where the kill cut an attempt.
	posts, bad := counter.snapshot()
	require.Empty(t, bad, "unexpected upstream calls")
	timelines := make([]wfTimeline, len(accepted))
	errs := make([]error, len(accepted))
	var twg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, id := range accepted {
		twg.Add(1)
		sem <- struct{}{}
		go func() {
			defer twg.Done()
			defer func() { <-sem }()
			r, err := live.try(client, http.MethodGet, apiBase+"/invocations/"+id+"/timeline?limit=200", live.Token, nil)
			switch {
			case err != nil:
				errs[i] = err
			case r.Status != http.StatusOK:
				errs[i] = fmt.Errorf("%s", r)
			default:
				errs[i] = json.Unmarshal(r.Body, &timelines[i])
			}
		}()
	}
	twg.Wait()
	var reclaimed, repeats int
	var notSucceeded []string
	for i, id := range accepted {
		require.NoError(t, errs[i], "%s: timeline", id)
		it, tl := byID[id], timelines[i]
		counts := map[string]int{}
		var types, steps []string
		for _, ev := range tl.Items {
			counts[ev.EventType]++
			types = append(types, ev.EventType)
			if ev.EventType == "step_completed" && ev.StepName != nil {
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
		require.Equal(t, 1, counts["succeeded"], "%s succeeded %d times: %v", id, counts["succeeded"], types)
		require.Equal(t, 1, counts["created"], "%s: %v", id, types)
		if counts["reclaimed"] > 0 {
			reclaimed++
		}
		keys := []string{id}
		if workflows[id] {
			keys = keys[:0]
			want := make([]string, wfCrashSteps)
			for s := range want {
				want[s] = fmt.Sprintf("s%d", s+1)
				keys = append(keys, id+"/"+want[s])
			}
			require.Equal(t, want, steps, "%s: a step journaled complete twice, or missing: %v", id, types)
		}
		for _, k := range keys {
			n := posts[k]
			require.GreaterOrEqual(t, n, 1, "%s succeeded without its side effect: %v", k, types)
			if n > 1 {
				repeats += n - 1
				require.Positive(t, counts["reclaimed"], "%s: %d side effects without a re-dispatch after the kill: %v", k, n, types)
			}
		}
	}
	require.Empty(t, notSucceeded, "accepted invocations that did not succeed")
	for i, w := range workers {
		require.Contains(t, w.stderr.String(), "worker: task started", "worker %d ran no task", i+1)
	}

	// Schedules: each instant recorded once with an invocation of its own, and instants fired after
	// the failover (the new leader's schedule loop runs).
	type run struct {
		ScheduledAt  time.Time `json:"scheduled_at"`
		Status       string    `json:"status"`
		InvocationID string    `json:"invocation_id"`
	}
	invs := map[string]string{}
	var started, afterFailover int
	until := time.Now().UTC().Add(-2 * time.Second)
	for i := range clusterSchedules {
		id := fmt.Sprintf("tick%02d", i)
		seen := map[time.Time]bool{}
		for _, raw := range live.listAll(apiBase+"/schedules/"+id+"/history?next_runs=0&until="+until.Format(time.RFC3339), live.Token) {
			var r run
			require.NoError(t, json.Unmarshal(raw, &r))
			require.False(t, seen[r.ScheduledAt], "%s: instant %s recorded twice", id, r.ScheduledAt)
			seen[r.ScheduledAt] = true
			if r.InvocationID == "" {
				continue
			}
			key := id + "@" + r.ScheduledAt.Format(time.RFC3339)
			prev, dup := invs[r.InvocationID]
			require.False(t, dup, "invocation %s belongs to %s and %s", r.InvocationID, prev, key)
			invs[r.InvocationID] = key
			started++
			if r.ScheduledAt.After(killAt.Add(failover)) {
				afterFailover++
			}
		}
		require.GreaterOrEqual(t, len(seen), int(until.Sub(schedulesFrom).Seconds())-2, "%s: instants accounted for (run or skipped)", id)
	}
	require.Positive(t, afterFailover, "no scheduled instant fired after the failover")

	t.Logf("%d nodes; submitted %d (%d async, %d workflows) in %v, %d accepted; killed the leader after %d submissions "+
		"and %d upstream calls, and a worker (%d requests cut by the kill, sent again to another node); "+
		"failover %v; all terminal %v after the kill; reclaimed %d, repeated side effects %d (all on reclaimed invocations); "+
		"schedules: %d runs started, %d after the failover; test %v",
		clusterNodes, total, clusterAsync, clusterWorkflows, submitTime.Round(time.Millisecond), len(accepted), submittedAtKill, callsAtKill, resent.Load(),
		failover.Round(time.Millisecond), recovery.Round(time.Millisecond), reclaimed, repeats, started, afterFailover,
		time.Since(testStart).Round(time.Millisecond))
	for _, n := range nodes {
		n.Stop()
	}
}

// freeAddr is a loopback address with a port free a moment ago, for a node that must come back on
// the same address after a restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
