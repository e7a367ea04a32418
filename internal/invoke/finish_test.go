package invoke_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/store"
)

// syncStart runs a sync Start in the background; the channel receives what it returned.
func (e *env) syncStart(name string) <-chan startOutcome {
	ch := make(chan startOutcome, 1)
	go func() {
		st, err := e.svc.Start(context.Background(), bob, invoke.StartRequest{EntrypointID: wfPrefix + name + ".v1~", Mode: "sync"}, invoke.StartOptions{})
		ch <- startOutcome{st, err}
	}()
	return ch
}

type startOutcome struct {
	st  invoke.Started
	err error
}

// awaitSuspended waits (at most 30 s) until the only invocation of workflow name is suspended.
func (e *env) awaitSuspended(name string) invocation.Record {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := e.svc.List(context.Background(), bob, store.ListQuery{Limit: 10})
		require.NoError(e.t, err)
		for _, r := range page.Items {
			if r.EntrypointID == wfPrefix+name+".v1~" && r.Status == invocation.StatusSuspended {
				return r
			}
		}
		require.False(e.t, time.Now().After(deadline), "no suspended invocation of %s", name)
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) outcome(ch <-chan startOutcome) invoke.Started {
	e.t.Helper()
	select {
	case o := <-ch:
		require.NoError(e.t, o.err)
		return o.st
	case <-time.After(30 * time.Second):
		require.FailNow(e.t, "the sync Start did not return")
		return invoke.Started{}
	}
}

// TestSyncWorkflowIsWokenByItsEnd: a sync Start of a workflow waits across its durable timer and is
// woken by the commit of the terminal status — with no Observer, and with a store poll too slow to
// be what wakes it — and a cancel while it waits ends the wait with the canceled record.
func TestSyncWorkflowIsWokenByItsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reconfigure(func(c *invoke.Config) { c.SyncPoll = time.Hour })
	e.workflow("sync_timer", `
def main(ctx, input):
    r_sleep(2000)
    return {"woke": r_now_v1()}
`)
	e.workflow("sync_cancel", `
def main(ctx, input):
    r_sleep(3600000)
    return {}
`, func(b map[string]any) {
		b["traits"].(map[string]any)["limits"] = map[string]any{"timeout_seconds": 600}
	})

	t.Run("timer", func(t *testing.T) {
		call := e.syncStart("sync_timer")
		rec := e.awaitSuspended("sync_timer")
		select {
		case o := <-call:
			require.FailNow(t, "returned at the suspension", "%+v", o)
		default:
		}
		e.clock.Advance(2 * time.Second)
		require.Equal(t, 1, e.Drain())
		st := e.outcome(call)
		require.False(t, st.Unfinished)
		require.Equal(t, rec.ID, st.Record.ID)
		require.Equal(t, invocation.StatusSucceeded, st.Record.Status, "%+v", st.Record.Error)
		require.JSONEq(t, `{"woke":"2026-03-01T12:00:02.000Z"}`, string(st.Record.Result))
	})

	t.Run("cancel", func(t *testing.T) {
		call := e.syncStart("sync_cancel")
		rec := e.awaitSuspended("sync_cancel")
		_, _, err := e.svc.Control(context.Background(), bob, rec.ID, invoke.ActionCancel)
		require.NoError(t, err)
		st := e.outcome(call)
		require.False(t, st.Unfinished)
		require.Equal(t, invocation.StatusCanceled, st.Record.Status)
	})
}
