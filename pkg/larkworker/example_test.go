package larkworker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// "adapter_ref": {"definition_id": "billing.charge"}}, and its invocations go to this worker.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, admin, stop := exampleServer(ctx, "wk1:example-worker-key-0123456789")
	defer stop()

	w, err := larkworker.New(base, "wk1:example-worker-key-0123456789")
	if err != nil {
		panic(err)
	}
	w.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w.Handle("billing.charge", func(ctx context.Context, t larkworker.Task) (any, error) {
		var p struct {
			Amount int `json:"amount"`
		}
		if err := json.Unmarshal(t.Params, &p); err != nil {
			return nil, larkworker.NonRetryable("bad params: %v", err)
		}
		return map[string]any{"charged": p.Amount, "attempt": t.Attempt}, nil
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	rec := exampleInvoke(base, admin, map[string]any{"amount": 42})
	fmt.Println(rec["status"], rec["result"])
	cancel()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output: succeeded map[attempt:1 charged:42]
}

const exampleOperator = "example-operator-token"

// exampleServer runs a Lark server that accepts the worker key, with a tenant and the
// entrypoint, and returns its URL and an admin token of the tenant.
func exampleServer(ctx context.Context, key string) (string, string, func()) {
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
	ts := httptest.NewServer(srv.Handler())
	dctx, stopDispatch := context.WithCancel(ctx)
	dispatched := make(chan struct{})
	go func() { defer close(dispatched); srv.RunDispatcher(dctx) }()
	call(ts.URL, exampleOperator, "/tenants/acme/serverless-runtime:enable", map[string]any{})
	admin := call(ts.URL, exampleOperator, "/tokens", map[string]any{"tenant_id": "acme", "subject_id": "admin", "roles": []string{"admin"}})["token"].(string)
	ep := call(ts.URL, admin, "/entrypoints", map[string]any{
		"entrypoint_id": "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.billing.payments.charge.v1~",
		"title":         "Charge", "description": "Charges a card (implemented by a Go worker).",
		"schema": map[string]any{"params": map[string]any{"type": "object"}, "returns": map[string]any{"type": "object"}},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.worker.v1~", "kind": "adapter_ref",
			"adapter_ref": map[string]any{"definition_id": "billing.charge"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []string{"async"}, "default": "async"},
			"limits": map[string]any{"timeout_seconds": 10},
			"retry":  map[string]any{"max_attempts": 3, "initial_delay_ms": 100, "max_delay_ms": 1000, "backoff_multiplier": 2.0}},
	})
	call(ts.URL, admin, "/entrypoints/"+ep["id"].(string)+":status", map[string]any{"action": "activate"})
	exampleEntrypoint = ep["entrypoint_id"].(string)
	return ts.URL, admin, func() {
		stopDispatch()
		<-dispatched
		ts.Close()
		_ = srv.Close()
		_ = os.RemoveAll(dir)
	}
}

var exampleEntrypoint string

// exampleInvoke starts an async invocation and waits for its end.
func exampleInvoke(base, token string, params map[string]any) map[string]any {
	rec := call(base, token, "/invocations", map[string]any{"entrypoint_id": exampleEntrypoint, "mode": "async", "params": params})["record"].(map[string]any)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got := call(base, token, "/invocations/"+rec["invocation_id"].(string), nil)
		if s := got["status"]; s == "succeeded" || s == "failed" {
			return got
		}
	}
	panic("the invocation did not end")
}

// call sends a request to the API (POST with a body, GET without) and decodes the answer.
func call(base, token, path string, body any) map[string]any {
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+"/api/serverless-runtime/v1"+path, rd)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
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
