package larkworker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/workerproto"
	"github.com/larkrun/lark/pkg/larkworker"
)

// A Go program implements the entrypoint billing.charge itself: the entrypoint is registered with
// implementation {"adapter": "gts.x.core.serverless.adapter.worker.v1~", "kind": "adapter_ref",
// "adapter_ref": {"definition_id": "billing.charge"}}, and its invocations go to this worker. The
// server here serves HTTPS with a certificate of its own (as behind a private CA): the worker is
// given an *http.Client that trusts it.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := exampleServer(ctx, "wk1:example-worker-key-0123456789")
	defer node.stop()

	w, err := larkworker.New(node.url, "wk1:example-worker-key-0123456789")
	if err != nil {
		panic(err)
	}
	w.HTTPClient = node.client // TLS with a private CA, a proxy, timeouts: any *http.Client
	w.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w.Handle("billing.charge", charge)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	rec := node.invoke(map[string]any{"amount": 42})
	fmt.Println(rec["status"], rec["result"])
	cancel()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output: succeeded map[attempt:1 charged:42]
}

// A worker of a cluster polls every node: each hands out the attempts its own dispatcher claimed,
// and a task's heartbeats and result go back to the node it came from. (The two servers here
// stand for two nodes; a real cluster's nodes share one PostgreSQL database, docs/deployment.md.)
func ExampleNewCluster() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node1 := exampleServer(ctx, "wk1:example-worker-key-0123456789")
	defer node1.stop()
	node2 := exampleServer(ctx, "wk1:example-worker-key-0123456789")
	defer node2.stop()

	w, err := larkworker.NewCluster([]string{node1.url, node2.url}, "wk1:example-worker-key-0123456789")
	if err != nil {
		panic(err)
	}
	w.HTTPClient = node1.client // httptest's servers share one certificate
	w.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w.Handle("billing.charge", charge)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	for i, node := range []*exampleNode{node1, node2} {
		rec := node.invoke(map[string]any{"amount": 10 * (i + 1)})
		fmt.Println("node", i+1, rec["status"], rec["result"])
	}
	cancel()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output:
	// node 1 succeeded map[attempt:1 charged:10]
	// node 2 succeeded map[attempt:1 charged:20]
}

// charge is the handler of billing.charge.
func charge(_ context.Context, t larkworker.Task) (any, error) {
	var p struct {
		Amount int `json:"amount"`
	}
	if err := json.Unmarshal(t.Params, &p); err != nil {
		return nil, larkworker.NonRetryable("bad params: %v", err)
	}
	return map[string]any{"charged": p.Amount, "attempt": t.Attempt}, nil
}

const exampleOperator = "example-operator-token"

// exampleNode is an in-process Lark server over HTTPS with a tenant and the entrypoint.
type exampleNode struct {
	url, admin string
	client     *http.Client // trusts the server's certificate
	entrypoint string
	stop       func()
}

// exampleServer runs a Lark server that accepts the worker key, with a tenant and the
// entrypoint.
func exampleServer(ctx context.Context, key string) *exampleNode {
	dir, err := os.MkdirTemp("", "larkworker-example")
	if err != nil {
		panic(err)
	}
	ks, err := workerproto.ParseKeys([]string{key})
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(ctx, server.Config{DataDir: dir, AdminToken: exampleOperator, WorkerKeys: ks, Logger: quiet})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes cut short when the worker stops
	ts.StartTLS()
	dctx, stopDispatch := context.WithCancel(ctx)
	dispatched := make(chan struct{})
	go func() { defer close(dispatched); srv.RunDispatcher(dctx) }()
	n := &exampleNode{url: ts.URL, client: ts.Client()}
	n.call(exampleOperator, "/tenants/acme/serverless-runtime:enable", map[string]any{})
	n.admin = n.call(exampleOperator, "/tokens", map[string]any{"tenant_id": "acme", "subject_id": "admin", "roles": []string{"admin"}})["token"].(string)
	ep := n.call(n.admin, "/entrypoints", map[string]any{
		"entrypoint_id": "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.billing.payments.charge.v1~",
		"title":         "Charge", "description": "Charges a card (implemented by a Go worker).",
		"schema": map[string]any{"params": map[string]any{"type": "object"}, "returns": map[string]any{"type": "object"}},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.worker.v1~", "kind": "adapter_ref",
			"adapter_ref": map[string]any{"definition_id": "billing.charge"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []string{"async"}, "default": "async"},
			"limits": map[string]any{"timeout_seconds": 10},
			"retry":  map[string]any{"max_attempts": 3, "initial_delay_ms": 100, "max_delay_ms": 1000, "backoff_multiplier": 2.0}},
	})
	n.call(n.admin, "/entrypoints/"+ep["id"].(string)+":status", map[string]any{"action": "activate"})
	n.entrypoint = ep["entrypoint_id"].(string)
	n.stop = func() {
		stopDispatch()
		<-dispatched
		ts.Close()
		_ = srv.Close()
		_ = os.RemoveAll(dir)
	}
	return n
}

// invoke starts an async invocation and waits for its end.
func (n *exampleNode) invoke(params map[string]any) map[string]any {
	rec := n.call(n.admin, "/invocations", map[string]any{"entrypoint_id": n.entrypoint, "mode": "async", "params": params})["record"].(map[string]any)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got := n.call(n.admin, "/invocations/"+rec["invocation_id"].(string), nil)
		if s := got["status"]; s == "succeeded" || s == "failed" {
			return got
		}
	}
	panic("the invocation did not end")
}

// call sends a request to the API (POST with a body, GET without) and decodes the answer.
func (n *exampleNode) call(token, path string, body any) map[string]any {
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.url+"/api/serverless-runtime/v1"+path, rd)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		panic(fmt.Sprintf("%s %s: %d %s", method, path, resp.StatusCode, raw))
	}
	_ = json.Unmarshal(raw, &out)
	return out
}
