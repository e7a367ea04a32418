package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// TestOneLeaderAmongNodes: two servers on one PostgreSQL schema: exactly one leads (runs the
// singletons); when it shuts down it releases the lease and the other leads within a renewal
// period or two. On SQLite a server has no election: it always runs its singletons.
func TestOneLeaderAmongNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	type node struct {
		srv  *Server
		stop context.CancelFunc
		done chan error
	}
	start := func(id string) node {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		srv, err := New(ctx, Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Store: url, NodeID: id,
			LeaderTTL: 3 * time.Second, LeaderRenew: 100 * time.Millisecond})
		require.NoError(t, err)
		require.NotNil(t, srv.Leader, "a shared store elects a leader")
		ln, err := srv.Listen()
		require.NoError(t, err)
		n := node{srv: srv, stop: cancel, done: make(chan error, 1)}
		go func() { n.done <- srv.Serve(ctx, ln) }()
		return n
	}
	a, b := start("a"), start("b")
	leaders := func() (n int, who *node) {
		for _, x := range []*node{&a, &b} {
			if x.srv.Leader.Leading() {
				n++
				who = x
			}
		}
		return n, who
	}
	var leader *node
	require.Eventually(t, func() bool {
		n, who := leaders()
		leader = who
		return n == 1
	}, 10*time.Second, 10*time.Millisecond, "exactly one node leads")
	for range 20 { // and it stays one
		n, _ := leaders()
		require.LessOrEqual(t, n, 1)
		time.Sleep(10 * time.Millisecond)
	}
	other := &a
	if leader == &a {
		other = &b
	}
	stopped := time.Now()
	leader.stop()
	select {
	case err := <-leader.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not stop")
	}
	require.Eventually(t, other.srv.Leader.Leading, 5*time.Second, 10*time.Millisecond,
		"the other node leads once the lease is released")
	require.Less(t, time.Since(stopped), 3*time.Second, "took over before the TTL: the lease was released, not waited out")
	other.stop()
	require.NoError(t, <-other.done)
}

// TestSQLiteAlwaysLeads: on the embedded store there is no election.
func TestSQLiteAlwaysLeads(t *testing.T) {
	t.Parallel()
	srv, err := New(context.Background(), Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	require.NoError(t, err)
	defer srv.Close()
	require.Nil(t, srv.Leader)
	require.Nil(t, srv.hub)
}

// twoNodes are two servers on one PostgreSQL schema: node A serves the API (through httptest) and the wake-ups but runs no
// dispatcher; node B serves fully. call sends a request to A as the dev admin.
type twoNodes struct {
	a, b *Server
	call func(method, path, body string, want int) map[string]any
	// apiA and apiB are the two nodes' API roots; token is the dev admin's bearer token.
	apiA, apiB, token string
}

func startTwoNodes(ctx context.Context, t *testing.T, a, b Config) twoNodes {
	t.Helper()
	url := pgtest.Schema(t)
	data := t.TempDir()
	a.Addr, a.DataDir, a.Store, a.NodeID = "127.0.0.1:0", data, url, "a"
	b.Addr, b.DataDir, b.Store, b.NodeID = "127.0.0.1:0", t.TempDir(), url, "b"
	na, err := New(ctx, a)
	require.NoError(t, err)
	t.Cleanup(func() { na.Close() })
	creds, err := LoadOrCreateDevAdmin(data)
	require.NoError(t, err)
	require.NoError(t, na.ProvisionDev(ctx, &creds))
	go na.RunWakeups(ctx) // A announces and hears; it claims nothing
	nb, err := New(ctx, b)
	require.NoError(t, err)
	ln, err := nb.Listen()
	require.NoError(t, err)
	bctx, stopB := context.WithCancel(ctx)
	bdone := make(chan error, 1)
	go func() { bdone <- nb.Serve(bctx, ln) }()
	t.Cleanup(func() { stopB(); require.NoError(t, <-bdone) })
	api := httptest.NewServer(na.Handler())
	t.Cleanup(api.Close)
	call := func(method, path, body string, want int) map[string]any {
		t.Helper()
		req, err := http.NewRequest(method, api.URL+"/api/serverless-runtime/v1"+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+creds.Token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		require.Equal(t, want, res.StatusCode, "%s %s: %v", method, path, out)
		return out
	}
	return twoNodes{a: na, b: nb, call: call, apiA: api.URL + "/api/serverless-runtime/v1",
		apiB: "http://" + ln.Addr().String() + "/api/serverless-runtime/v1", token: creds.Token}
}

// TestWakeUpCrossesNodes: an invocation started through node A, whose dispatcher does not run, is
// run by node B at once, though B's dispatcher polls only once a minute: A's commit notified B.
func TestWakeUpCrossesNodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startTwoNodes(ctx, t, Config{}, Config{DispatchPoll: time.Minute})
	b, call := n.b, n.call
	const fn = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.wake.echo.v1~"
	call(http.MethodPost, "/entrypoints", `{"entrypoint_id":"`+fn+`","title":"echo","owner":{"owner_type":"tenant"},
		"schema":{"params":{"type":"object"}},"traits":{"invocation":{"supported":["async"],"default":"async"},"limits":{"timeout_seconds":5},"retry":{"max_attempts":1}},
		"implementation":{"adapter":"gts.x.core.serverless.adapter.starlark.v1~","kind":"code",
		"code":{"language":"starlark","source":"def main(ctx, input):\n  return {\"ok\": True}\n"}}}`, http.StatusCreated)
	call(http.MethodPost, "/entrypoints/"+fn+":status", `{"action":"activate"}`, http.StatusOK)
	time.Sleep(200 * time.Millisecond) // B's dispatcher has made its first claim and sleeps for its minute
	started := time.Now()
	inv := call(http.MethodPost, "/invocations", `{"entrypoint_id":"`+fn+`","mode":"async","params":{}}`, http.StatusAccepted)
	id := inv["record"].(map[string]any)["invocation_id"].(string)
	require.Eventually(t, func() bool {
		rec, err := b.Store.Invocation(ctx, "dev", id)
		return err == nil && rec.Status == invocation.StatusSucceeded
	}, 10*time.Second, 10*time.Millisecond, "node B did not run the invocation node A queued")
	t.Logf("queued on A, run on B in %v (B's poll: 1 min)", time.Since(started).Round(time.Millisecond))
}

// TestSyncWorkflowEndCrossesNodes: a sync invocation of a workflow taken by node A (which runs no
// dispatcher) parks on a timer; node B runs its next activation and commits its end; A's waiting
// request answers at once, though A reads the store for it only once a minute: B's commit
// notified A.
func TestSyncWorkflowEndCrossesNodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call := startTwoNodes(ctx, t, Config{SyncPoll: time.Minute}, Config{}).call
	const wf = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.wake.nap.v1~"
	call(http.MethodPost, "/entrypoints", `{"entrypoint_id":"`+wf+`","title":"nap","owner":{"owner_type":"tenant"},
		"schema":{"params":{"type":"object"}},"traits":{"invocation":{"supported":["sync","async"],"default":"sync"},"limits":{"timeout_seconds":30},
		"retry":{"max_attempts":1},"workflow":{"compensation":{"on_failure":null,"on_cancel":null},"checkpointing":{"strategy":"automatic"},"max_suspension_days":1}},
		"implementation":{"adapter":"gts.x.core.serverless.adapter.starlark.v1~","kind":"code",
		"code":{"language":"starlark","source":"def main(ctx, input):\n  r_sleep(300)\n  return {\"ok\": True}\n"}}}`, http.StatusCreated)
	call(http.MethodPost, "/entrypoints/"+wf+":status", `{"action":"activate"}`, http.StatusOK)
	started := time.Now()
	out := call(http.MethodPost, "/invocations", `{"entrypoint_id":"`+wf+`","mode":"sync","params":{}}`, http.StatusOK)
	took := time.Since(started)
	require.Equal(t, "succeeded", out["record"].(map[string]any)["status"], "%v", out)
	require.Less(t, took, 20*time.Second, "the request waited for A's poll, not B's notification")
	t.Logf("sync workflow taken by A, finished by B, answered in %v (A's poll: 1 min)", took.Round(time.Millisecond))
}

// TestIdempotencyKeyAcrossNodes: the same request with the same Idempotency-Key sent to two nodes
// at once starts one invocation: both answers name it, and the store holds one per key. (Each node
// reads the key, finds none and inserts its own; the second put finds the first's committed key,
// its writes are undone and it replays the first's invocation.)
func TestIdempotencyKeyAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startTwoNodes(ctx, t, Config{}, Config{})
	const fn = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.idem.echo.v1~"
	n.call(http.MethodPost, "/entrypoints", `{"entrypoint_id":"`+fn+`","title":"echo","owner":{"owner_type":"tenant"},
		"schema":{"params":{"type":"object"}},"traits":{"invocation":{"supported":["async"],"default":"async"},"limits":{"timeout_seconds":5},"retry":{"max_attempts":1}},
		"implementation":{"adapter":"gts.x.core.serverless.adapter.starlark.v1~","kind":"code",
		"code":{"language":"starlark","source":"def main(ctx, input):\n  return {\"ok\": True}\n"}}}`, http.StatusCreated)
	n.call(http.MethodPost, "/entrypoints/"+fn+":status", `{"action":"activate"}`, http.StatusOK)
	start := func(api, key string) (string, error) {
		req, err := http.NewRequest(http.MethodPost, api+"/invocations", strings.NewReader(`{"entrypoint_id":"`+fn+`","mode":"async","params":{}}`))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+n.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		var out struct {
			Record struct {
				ID string `json:"invocation_id"`
			} `json:"record"`
		}
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			return "", err
		}
		if res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %d", res.StatusCode)
		}
		return out.Record.ID, nil
	}
	const keys = 30
	for i := range keys {
		key := fmt.Sprintf("key-%d", i)
		var ids [2]string
		var errs [2]error
		var wg sync.WaitGroup
		for j, api := range []string{n.apiA, n.apiB} {
			wg.Go(func() { ids[j], errs[j] = start(api, key) })
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs[:]...), key)
		require.NotEmpty(t, ids[0], key)
		require.Equal(t, ids[0], ids[1], "%s: the two nodes started different invocations", key)
	}
	page, err := n.a.Store.ListInvocations(ctx, invocation.Viewer{TenantID: "dev", All: true}, store.ListQuery{Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Items, keys, "one invocation per key")
}
