package larkworker_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/workerproto"
	"github.com/larkrun/lark/pkg/larkworker"
)

const testKey = "wk1:larkworker-test-key-0123456789"

// fakeNode is one node of a cluster speaking the worker protocol over TLS: it hands out one
// adapter_ref task at its first poll, holds later polls until the worker stops, and records the
// heartbeats and results it is sent (their envelopes verified).
type fakeNode struct {
	ts      *httptest.Server
	ks      *workerproto.Keyset
	task    workerproto.Task
	beat    chan struct{} // closed at the first heartbeat naming the node's task
	result  chan struct{} // closed at the first result
	mu      sync.Mutex
	handed  bool
	beats   [][]string
	results []workerproto.Result
}

func newFakeNode(t *testing.T, ks *workerproto.Keyset, name string) *fakeNode {
	t.Helper()
	n := &fakeNode{ks: ks, beat: make(chan struct{}), result: make(chan struct{}),
		task: workerproto.Task{ID: "wt_" + name, TenantID: "acme", InvocationID: "inv_" + name, EntrypointID: "ep~",
			Kind: workerproto.KindAdapterRef, DefinitionID: "billing.charge", Record: json.RawMessage(`{"attempt":2}`),
			Params: json.RawMessage(`{"amount":7}`), Limits: workerproto.Limits{TimeoutMS: 30000, MemoryMB: 128},
			LeaseOwner: "node_" + name + "/1/1", ResultPath: "/workers/tasks/wt_" + name + "/result"}}
	n.ts = httptest.NewUnstartedServer(http.HandlerFunc(n.serve))
	n.ts.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the worker's shutdown cuts short
	n.ts.StartTLS()
	t.Cleanup(n.ts.Close)
	return n
}

func (n *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	var env workerproto.Envelope
	if err := json.NewDecoder(r.Body).Decode(&env); err != nil || n.ks.Verify(env, time.Now(), nil) != nil {
		http.Error(w, "bad envelope", http.StatusUnauthorized)
		return
	}
	var answer any
	switch path := strings.TrimPrefix(r.URL.Path, "/api/serverless-runtime/v1"); path {
	case workerproto.PathPoll:
		n.mu.Lock()
		first := !n.handed
		n.handed = true
		n.mu.Unlock()
		if !first {
			<-r.Context().Done() // a long poll with nothing more: until the worker stops
			return
		}
		answer = workerproto.PollReply{Tasks: []workerproto.Task{n.task}, HeartbeatIntervalMS: 10}
	case workerproto.PathHeartbeat:
		var hb workerproto.Heartbeat
		if json.Unmarshal(env.Body, &hb) != nil {
			http.Error(w, "bad heartbeat", http.StatusUnprocessableEntity)
			return
		}
		n.mu.Lock()
		n.beats = append(n.beats, hb.Tasks)
		for _, id := range hb.Tasks {
			if id == n.task.ID && !isClosed(n.beat) {
				close(n.beat)
			}
		}
		n.mu.Unlock()
		answer = workerproto.HeartbeatReply{}
	case n.task.ResultPath:
		var res workerproto.Result
		if json.Unmarshal(env.Body, &res) != nil {
			http.Error(w, "bad result", http.StatusUnprocessableEntity)
			return
		}
		n.mu.Lock()
		n.results = append(n.results, res)
		if len(n.results) == 1 {
			close(n.result)
		}
		n.mu.Unlock()
		answer = map[string]bool{"accepted": true}
	default:
		http.NotFound(w, r)
		return
	}
	signed, err := n.ks.Sign(answer, time.Now(), workerproto.DefaultLifetime)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b, err := json.Marshal(signed)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// countingTransport counts the requests sent through it, by host.
type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.URL.Host]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// waitClosed waits for c to be closed, failing the test after a deadline.
func waitClosed(t *testing.T, c chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestClusterAndHTTPClient: a worker made with NewCluster polls both nodes of a cluster (served
// over TLS with a certificate only the given *http.Client trusts), runs one task from each at
// once, sends each task's heartbeats and result to the node that handed it out and nowhere else,
// keeps a Retryable error's category, and sends every request through the client.
func TestClusterAndHTTPClient(t *testing.T) {
	t.Parallel()
	ks, err := workerproto.ParseKeys([]string{testKey})
	require.NoError(t, err)
	a, b := newFakeNode(t, ks, "a"), newFakeNode(t, ks, "b")

	w, err := larkworker.NewCluster([]string{a.ts.URL, b.ts.URL}, testKey)
	require.NoError(t, err)
	tr := &countingTransport{next: a.ts.Client().Transport, n: map[string]int{}}
	w.HTTPClient = &http.Client{Transport: tr}
	w.Concurrency = 2
	w.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	w.Handle("billing.charge", func(ctx context.Context, task larkworker.Task) (any, error) {
		started.Done()
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if task.InvocationID == "inv_b" {
			return nil, larkworker.Retryable("card network busy")
		}
		return map[string]any{"invocation": task.InvocationID, "attempt": task.Attempt, "params": task.Params}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // before the nodes close, should the test fail
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	// Both tasks run at once (the two polls share the two slots), and each node hears of its own.
	waitClosed(t, a.beat, "node a's heartbeat")
	waitClosed(t, b.beat, "node b's heartbeat")
	close(release)
	waitClosed(t, a.result, "node a's result")
	waitClosed(t, b.result, "node b's result")
	cancel()
	require.NoError(t, <-done)
	started.Wait()

	for _, n := range []*fakeNode{a, b} {
		n.mu.Lock()
		for _, beat := range n.beats {
			require.Equal(t, []string{n.task.ID}, beat, "a node hears only of the tasks it handed out")
		}
		require.Len(t, n.results, 1, "one result, to the node that handed the task out")
		res := n.results[0]
		n.mu.Unlock()
		require.Equal(t, n.task.ID, res.TaskID)
		require.Equal(t, n.task.LeaseOwner, res.LeaseOwner)
		require.Equal(t, w.ID, res.WorkerID)
		require.NotEmpty(t, res.Metrics)
		if n == a {
			require.Nil(t, res.Error)
			require.JSONEq(t, `{"invocation":"inv_a","attempt":2,"params":{"amount":7}}`, string(res.Output))
		} else {
			require.Nil(t, res.Output)
			require.Equal(t, &workerproto.Error{TypeID: larkworker.ErrRuntime, Category: larkworker.CategoryRetryable,
				Message: "card network busy"}, res.Error)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, n := range []*fakeNode{a, b} {
		// a poll, a heartbeat and a result at least, all through the given client
		require.GreaterOrEqual(t, tr.n[strings.TrimPrefix(n.ts.URL, "https://")], 3, n.ts.URL)
	}
}

// TestNewRefusesBadURLs: the constructors name a URL that is not an http(s) base URL, and need one.
func TestNewRefusesBadURLs(t *testing.T) {
	t.Parallel()
	_, err := larkworker.New("", testKey)
	require.ErrorContains(t, err, "server URL is required")
	_, err = larkworker.NewCluster([]string{"http://lark-1:8080", "lark-2:8080"}, testKey)
	require.ErrorContains(t, err, `"lark-2:8080"`)
	_, err = larkworker.NewCluster(nil, testKey)
	require.ErrorContains(t, err, "no server URL")
	_, err = larkworker.New("http://lark:8080", "no-secret")
	require.Error(t, err)
}

// TestDeps: the SDK links neither the Starlark interpreter (upstream or the vendored copy in
// third_party) nor an OpenTelemetry exporter nor gRPC (nor, through them, the JSON Schema
// validator): a program that embeds it pulls the protocol, the OpenTelemetry API and little else.
func TestDeps(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not available")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/larkrun/lark/pkg/larkworker").CombinedOutput()
	require.NoError(t, err, string(out))
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/larkrun/lark/internal/workerclient", "go list answered for the SDK")
	for _, dep := range deps {
		for _, banned := range []string{"go.starlark.net", "github.com/larkrun/lark/third_party", "go.opentelemetry.io/otel/exporters",
			"go.opentelemetry.io/otel/sdk", "google.golang.org/grpc", "github.com/santhosh-tekuri/jsonschema",
			"github.com/larkrun/lark/internal/sandbox", "github.com/larkrun/lark/internal/run"} {
			require.False(t, dep == banned || strings.HasPrefix(dep, banned+"/"),
				"pkg/larkworker depends on %s", dep)
		}
	}
}
