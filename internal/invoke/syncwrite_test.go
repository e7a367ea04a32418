package invoke_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/store"
)

// writeLog is the invocation service's store, counting its writes and noting, after each, the
// invocations of tenant acme that exist.
type writeLog struct {
	invoke.Store
	mu    sync.Mutex
	after [][]string // ids after each write, in commit order
}

func (w *writeLog) Update(ctx context.Context, fn func(store.Tx) error) error {
	err := w.Store.Update(ctx, fn)
	w.note(ctx)
	return err
}

func (w *writeLog) Enqueue(ctx context.Context, fn func(store.Tx) error) func() error {
	wait := w.Store.Enqueue(ctx, fn)
	return func() error {
		err := wait()
		w.note(ctx)
		return err
	}
}

func (w *writeLog) note(ctx context.Context) {
	page, _ := w.ListInvocations(context.WithoutCancel(ctx), invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: 100})
	var ids []string
	for _, r := range page.Items {
		ids = append(ids, r.ID)
	}
	w.mu.Lock()
	w.after = append(w.after, ids)
	w.mu.Unlock()
}

func (w *writeLog) writes() [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.after)
}

// TestSyncCallIsOneWrite: a sync function call that ends before its start's delay is written once
// (created, started and its outcome in one transaction); one that starts a child first makes its
// own start durable, so the child's record never reaches the disk before its parent's.
func TestSyncCallIsOneWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	log := &writeLog{Store: e.cfg.Store}
	e.reconfigure(func(c *invoke.Config) { c.Store, c.SyncStartDelay = log, time.Hour })
	e.fn("leaf", "def main(ctx, input):\n    return {\"leaf\": True}\n", nil)
	e.fn("parent", "def main(ctx, input):\n    return r_await(r_invoke_v1(\""+fnPrefix+"leaf.v1~\", {}))\n", nil)

	out, err := e.start(dev, invoke.StartRequest{EntrypointID: fnPrefix + "leaf.v1~", Mode: "sync", Params: []byte(`{}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, out.Record.Status)
	require.Len(t, log.writes(), 1, "start and outcome in one write")
	require.Equal(t, []string{out.Record.ID}, log.writes()[0])
	evs, err := e.store.Events(context.Background(), store.EventLogQuery{TenantID: "acme", InvocationID: out.Record.ID, Limit: 100})
	require.NoError(t, err)
	var types []invocation.EventType
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	require.Equal(t, []invocation.EventType{invocation.EventCreated, invocation.EventStarted, invocation.EventSucceeded}, types)

	out, err = e.start(dev, invoke.StartRequest{EntrypointID: fnPrefix + "parent.v1~", Mode: "sync", Params: []byte(`{}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, out.Record.Status, "%s", out.Record.Error)
	parent := out.Record.ID
	for i, ids := range log.writes()[1:] {
		if len(ids) > 2 { // the leaf of the first call, the parent, the child
			require.Contains(t, log.writes()[i], parent, "the parent's start was durable before its child's record")
			return
		}
	}
	t.Fatal("no write created the child")
}

// TestSyncWorkflowIsOneWrite: a plain sync workflow call of pure steps that ends before its start's
// delay is written once: created, started, its steps' entries and its outcome in one transaction.
// One whose step calls out makes its start and the entries before the call durable first (the
// call sees them in the store), and the rest follows as usual.
func TestSyncWorkflowIsOneWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	log := &writeLog{Store: e.cfg.Store}
	e.reconfigure(func(c *invoke.Config) { c.Store, c.SyncStartDelay = log, time.Hour })
	e.workflow("pure", "def s(ctx, input):\n    return input\n\ndef main(ctx, input):\n    r_run_step_v1(\"a\", s, 1)\n    r_run_step_v1(\"b\", s, 2)\n    return {\"ok\": True}\n")

	out, err := e.start(dev, invoke.StartRequest{EntrypointID: wfPrefix + "pure.v1~", Mode: "sync", Params: []byte(`{}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, out.Record.Status, "%s", out.Record.Error)
	require.Len(t, log.writes(), 1, "start, journal and outcome in one write")
	types := eventTypes(t, e, out.Record.ID)
	require.Equal(t, invocation.EventCreated, types[0])
	require.Equal(t, invocation.EventStarted, types[1])
	require.Equal(t, invocation.EventSucceeded, types[len(types)-1])
	require.Equal(t, 2, count(types, invocation.EventJournal))

	var mu sync.Mutex
	var seen []invocation.EventType // the caller's log, as the HTTP call found it in the store
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, _ := e.store.ListInvocations(context.Background(), invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: 100})
		for _, rec := range page.Items {
			if rec.EntrypointID == wfPrefix+"effect.v1~" {
				mu.Lock()
				seen = eventTypes(t, e, rec.ID)
				mu.Unlock()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	e.workflow("effect", `
def s(ctx, input):
    return input

def call(ctx, input):
    return r_await(r_http_post_v1("`+srv.URL+`", {}, timeout_ms=2000)).response.body

def main(ctx, input):
    r_run_step_v1("a", s, 1)
    r_run_step_v1("call", call, 2)
    r_run_step_v1("b", s, 3)
    return {"ok": True}
`)
	out, err = e.start(dev, invoke.StartRequest{EntrypointID: wfPrefix + "effect.v1~", Mode: "sync", Params: []byte(`{}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, out.Record.Status, "%s", out.Record.Error)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(seen), 3, "the start was durable before the call")
	require.Equal(t, []invocation.EventType{invocation.EventCreated, invocation.EventStarted}, seen[:2])
	require.Equal(t, 1, count(seen, invocation.EventJournal), "step a was durable before the call")
	require.Equal(t, 3, count(eventTypes(t, e, out.Record.ID), invocation.EventJournal))
}

// eventTypes lists the types of invocation id's events (tenant acme).
func eventTypes(t *testing.T, e *env, id string) []invocation.EventType {
	evs, err := e.store.Events(context.Background(), store.EventLogQuery{TenantID: "acme", InvocationID: id, Limit: 1000})
	require.NoError(t, err)
	var types []invocation.EventType
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	return types
}

// count is how many of types are t.
func count(types []invocation.EventType, t invocation.EventType) int {
	n := 0
	for _, x := range types {
		if x == t {
			n++
		}
	}
	return n
}
