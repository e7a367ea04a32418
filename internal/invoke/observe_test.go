package invoke_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/ratelimit"
	"github.com/larkrun/lark/internal/store"
)

// recorder is a writer.Observer that writes down what it hears, one line per call.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) Created(rec invocation.Record) { r.add("created %s %s", rec.ID, rec.Status) }
func (r *recorder) Dequeued(rec invocation.Record, waited time.Duration) {
	r.add("dequeued %s %v", rec.ID, waited)
}
func (r *recorder) Finished(rec invocation.Record) { r.add("finished %s %s", rec.ID, rec.Status) }
func (r *recorder) RateLimited(tenantID, entrypointID string) {
	r.add("rate_limited %s %s", tenantID, entrypointID)
}
func (r *recorder) QuotaExceeded(tenantID, quota string) {
	r.add("quota_exceeded %s %s", tenantID, quota)
}

// take returns the lines heard since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

// TestObserver: the Observer hears of every invocation created and of every one that reaches a
// terminal status, once, with the status it ends in (a failed function ends dead_lettered; a
// compensated workflow is reported when its compensation ends, not when it failed), of queued work
// starting and of refused starts; never of writes that were rolled back.
func TestObserver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	e.reconfigure(func(c *invoke.Config) { c.Observer = rec })
	ctx := context.Background()
	e.fn("ok", "def main(ctx, input):\n    return {\"ok\": True}\n", nil)
	e.fn("broken", "def main(ctx, input):\n    fail(\"boom\")\n", nil)
	start := func(name string, mode string, opt invoke.StartOptions) invoke.Started {
		t.Helper()
		st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + name + ".v1~", Mode: mode}, opt)
		require.NoError(t, err)
		return st
	}

	t.Run("sync: created running, finished succeeded or dead_lettered", func(t *testing.T) {
		// A sync call's start and outcome may be one write (runSync): created is then heard with the
		// final status. Either way: one created, then one finish.
		createdAs := func(got []string, id string, final invocation.Status) []string {
			if len(got) > 0 && got[0] == "created "+id+" "+string(final) {
				got[0] = "created " + id + " running"
			}
			return got
		}
		ok := start("ok", "sync", invoke.StartOptions{})
		require.Equal(t, []string{"created " + ok.Record.ID + " running", "finished " + ok.Record.ID + " succeeded"},
			createdAs(rec.take(), ok.Record.ID, invocation.StatusSucceeded))
		bad := start("broken", "sync", invoke.StartOptions{})
		require.Equal(t, invocation.StatusDeadLettered, bad.Record.Status)
		require.Equal(t, []string{"created " + bad.Record.ID + " running", "finished " + bad.Record.ID + " dead_lettered"},
			createdAs(rec.take(), bad.Record.ID, invocation.StatusDeadLettered), "failed → dead_lettered in one write is one finish")
	})

	t.Run("async: queued, dequeued after its wait, finished", func(t *testing.T) {
		st := start("ok", "async", invoke.StartOptions{})
		require.Equal(t, []string{"created " + st.Record.ID + " queued"}, rec.take())
		e.clock.Advance(3 * time.Second)
		require.Equal(t, 1, e.Drain())
		require.Equal(t, []string{"dequeued " + st.Record.ID + " 3s", "finished " + st.Record.ID + " succeeded"}, rec.take())
	})

	t.Run("cancel: finished canceled; a refused control reports nothing", func(t *testing.T) {
		st := start("ok", "async", invoke.StartOptions{})
		rec.take()
		_, _, err := e.svc.Control(ctx, bob, st.Record.ID, invoke.ActionCancel)
		require.NoError(t, err)
		require.Equal(t, []string{"finished " + st.Record.ID + " canceled"}, rec.take())
		_, _, err = e.svc.Control(ctx, bob, st.Record.ID, invoke.ActionCancel)
		require.Error(t, err)
		require.Empty(t, rec.take())
		require.Zero(t, e.Drain(), "nothing left to run")
	})

	t.Run("retry of a dead-lettered invocation finishes again", func(t *testing.T) {
		st := start("broken", "sync", invoke.StartOptions{})
		rec.take()
		_, _, err := e.svc.Control(ctx, bob, st.Record.ID, invoke.ActionRetry)
		require.NoError(t, err)
		require.Empty(t, rec.take(), "queued again is not an end")
		e.Drain()
		require.Equal(t, []string{"finished " + st.Record.ID + " dead_lettered"}, rec.take(), "attempt 2 is not dequeued (first attempts only)")
	})

	t.Run("an Idempotency-Key replay or misuse creates nothing", func(t *testing.T) {
		first := start("ok", "sync", invoke.StartOptions{IdempotencyKey: "k1"})
		rec.take()
		_, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "broken.v1~"}, invoke.StartOptions{IdempotencyKey: "k1"})
		require.Error(t, err, "the key was used for another request")
		again := start("ok", "sync", invoke.StartOptions{IdempotencyKey: "k1"})
		require.True(t, again.Replayed)
		require.Equal(t, first.Record.ID, again.Record.ID)
		require.Empty(t, rec.take())
	})

	t.Run("quota and rate limit refusals", func(t *testing.T) {
		e.fn("limited", "def main(ctx, input):\n    return {}\n", func(b map[string]any) {
			b["traits"].(map[string]any)["rate_limit"] = map[string]any{"strategy": ratelimit.TokenBucketStrategy,
				"config": map[string]any{"max_requests_per_minute": 1}}
		})
		start("limited", "sync", invoke.StartOptions{})
		rec.take()
		_, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "limited.v1~"}, invoke.StartOptions{})
		require.Error(t, err)
		require.Equal(t, []string{"rate_limited acme " + fnPrefix + "limited.v1~"}, rec.take())

		_, err = e.ten.Patch(ctx, operatorSC, "acme", []byte(`{"quotas":{"max_concurrent_executions":1}}`))
		require.NoError(t, err)
		start("ok", "async", invoke.StartOptions{})
		claimed := e.claim(4) // running now: acme is at its quota
		require.Len(t, claimed, 1)
		rec.take()
		_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "ok.v1~", Mode: "async"}, invoke.StartOptions{})
		require.Error(t, err)
		require.Equal(t, []string{"quota_exceeded acme max_concurrent_executions"}, rec.take())
		e.svc.Runner().Run(context.Background(), claimed[0])
		rec.take()
	})
}

// TestObserverCompensation: a workflow that fails with an on_failure handler is not finished while
// compensating; it finishes compensated when the handler (itself created and finished) ends.
func TestObserverCompensation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	e.reconfigure(func(c *invoke.Config) { c.Observer = rec })
	e.fn("rollback", "def main(ctx, input):\n    return {}\n", func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"$ref": "gts://gts.x.core.serverless.compensation_context.v1~"}}
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async", "sync"}, "default": "async"}
	})
	e.fn("order", "def main(ctx, input):\n    fail(\"out of stock\")\n", func(b map[string]any) {
		b["entrypoint_id"] = wfPrefix + "order.v1~"
		tr := b["traits"].(map[string]any)
		tr["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
		tr["workflow"] = map[string]any{"compensation": map[string]any{"on_failure": fnPrefix + "rollback.v1~", "on_cancel": nil},
			"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 30}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "order.v1~", Params: json.RawMessage(`{}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	wf := st.Record.ID
	e.Drain()
	var handler string
	lines := rec.take()
	for _, l := range lines {
		var id, status string
		if n, _ := fmt.Sscanf(l, "created %s %s", &id, &status); n == 2 && id != wf {
			handler = id
		}
	}
	require.NotEmpty(t, handler, "the handler was created: %v", lines)
	require.Equal(t, []string{
		"created " + wf + " queued",
		"dequeued " + wf + " 0s",
		"created " + handler + " queued", // with the workflow's failure
		"dequeued " + handler + " 0s",
		"finished " + handler + " succeeded",
		"finished " + wf + " compensated", // in the handler's completion
	}, lines)
}

// failingCommits is a store whose transactions, while fail is set, roll back after their closure
// succeeded (as when the commit itself fails).
type failingCommits struct {
	store.Store
	fail bool
}

func (f *failingCommits) Update(ctx context.Context, fn func(store.Tx) error) error {
	return f.Store.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if f.fail {
			return errors.New("commit failed")
		}
		return nil
	})
}

// TestObserverIgnoresRolledBackWrites: what a transaction created or ended is reported only once it
// committed.
func TestObserverIgnoresRolledBackWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	fc := &failingCommits{Store: e.store}
	e.reconfigure(func(c *invoke.Config) { c.Observer, c.Store = rec, fc })
	e.fn("ok", "def main(ctx, input):\n    return {}\n", nil)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "ok.v1~", Mode: "async"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Len(t, rec.take(), 1)

	fc.fail = true
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "ok.v1~", Mode: "sync"}, invoke.StartOptions{})
	require.Error(t, err)
	_, _, err = e.svc.Control(context.Background(), bob, st.Record.ID, invoke.ActionCancel)
	require.Error(t, err)
	require.Empty(t, rec.take(), "neither the start nor the cancel committed")

	fc.fail = false
	_, _, err = e.svc.Control(context.Background(), bob, st.Record.ID, invoke.ActionCancel)
	require.NoError(t, err)
	require.Equal(t, []string{"finished " + st.Record.ID + " canceled"}, rec.take())
}
