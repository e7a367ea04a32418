package invoke_test

import (
	"context"
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
