package scheduler_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/registry"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/scheduler"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tenancy"
)

// fireEnv is one tenant with one active async function, a scheduler over a real store and invoke,
// and a fake clock at 12:00 (a */5 schedule created now is next due at 12:05).
type fireEnv struct {
	st    store.Store
	clk   *clock.Fake
	inv   *invoke.Service
	sched *scheduler.Service
	sc    auth.SecurityContext
	ep    string
}

func newFireEnv(t *testing.T, o scheduler.Options) *fireEnv {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return newFireEnvOn(t, st, o)
}

// newFireEnvOn is newFireEnv on a store of the caller's.
func newFireEnvOn(t *testing.T, st store.Store, o scheduler.Options) *fireEnv {
	t.Helper()
	ctx := context.Background()
	schemas, err := schema.New()
	require.NoError(t, err)
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ids := idgen.UUIDv7{}
	inv := invoke.NewService(invoke.Config{Store: st, Schemas: schemas, Programs: sandbox.NewCache(8),
		Egress: egress.New(egress.Options{}), Clock: clk, IDs: ids, Node: "n"})
	t.Cleanup(inv.Close)
	operator := auth.SecurityContext{SubjectID: "operator", Operator: true}
	_, err = tenancy.NewService(st, clk, ids).Enable(ctx, operator, "acme", nil)
	require.NoError(t, err)
	sc := auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleDeveloper, auth.RoleOperator}}
	var body map[string]any
	dec := json.NewDecoder(strings.NewReader(`{"entrypoint_id": "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.tick.v1~",
		"title": "tick", "owner": {"owner_type": "tenant"}, "schema": {"params": {"type": "object"}},
		"traits": {"invocation": {"supported": ["async"], "default": "async"}, "retry": {"max_attempts": 1}, "limits": {"timeout_seconds": 5}},
		"implementation": {"adapter": "` + schema.StarlarkAdapter + `", "kind": "code",
			"code": {"language": "starlark", "source": "def main(ctx, input):\n  return {}\n"}}}`))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&body))
	reg := registry.NewService(st, schemas, clk, ids, nil)
	ep, _, err := reg.Register(ctx, sc, body)
	require.NoError(t, err, "%+v", problem.From(err).Issues)
	_, err = reg.ChangeStatus(ctx, sc, ep.ID, registry.StatusRequest{Action: entrypoint.ActionActivate})
	require.NoError(t, err)
	o.Clock, o.IDs = clk, ids
	return &fireEnv{st: st, clk: clk, inv: inv, sched: scheduler.New(st, inv, o), sc: sc, ep: ep.GTSID}
}

// every5 creates a */5 schedule with the concurrency policy given.
func (e *fireEnv) every5(t *testing.T, concurrency schedule.ConcurrencyPolicy) schedule.Schedule {
	t.Helper()
	sch, err := e.sched.Create(context.Background(), e.sc, scheduler.Spec{EntrypointID: e.ep,
		Expression: &schedule.Expression{Kind: "cron", Value: "*/5 * * * *"}, ConcurrencyPolicy: string(concurrency)})
	require.NoError(t, err)
	return sch
}

// runs returns a schedule's runs, oldest instant first.
func (e *fireEnv) runs(t *testing.T, id string) []scheduler.RunView {
	t.Helper()
	h, err := e.sched.History(context.Background(), e.sc, id, store.ListQuery{Limit: 100}, 0)
	require.NoError(t, err)
	out := h.Page.Items
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// TestFireDueOncePerInstant: a due schedule becomes one started run and one queued invocation per
// instant; firing again at the same time, or before the next instant, starts nothing.
func TestFireDueOncePerInstant(t *testing.T) {
	ctx := context.Background()
	e := newFireEnv(t, scheduler.Options{})
	sch := e.every5(t, schedule.ConcurrencyForbid)
	five := time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC)
	require.Equal(t, five, sch.NextRunAt.UTC())

	n, err := e.sched.FireDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "not due yet")

	e.clk.Set(five)
	n, err = e.sched.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = e.sched.FireDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "an instant fires once")

	runs := e.runs(t, sch.ID)
	require.Len(t, runs, 1)
	require.Equal(t, schedule.KindScheduled, runs[0].Kind)
	require.Equal(t, schedule.RunStarted, runs[0].State)
	require.Equal(t, five, runs[0].ScheduledAt.UTC())
	rec, err := e.st.Invocation(ctx, "acme", runs[0].InvocationID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusQueued, rec.Status)
	require.Equal(t, e.ep, rec.EntrypointID)

	got, err := e.sched.Get(ctx, e.sc, sch.ID)
	require.NoError(t, err)
	require.Equal(t, five.Add(5*time.Minute), got.NextRunAt.UTC(), "the next instant is due next")
	require.Equal(t, runs[0].InvocationID, got.LastInvocationID)
}

// TestFireDueAhead: a schedule whose concurrency_policy is allow is fired up to Lookahead before
// its instant, its invocation queued runnable from the instant; a forbid schedule waits for it.
func TestFireDueAhead(t *testing.T) {
	ctx := context.Background()
	e := newFireEnv(t, scheduler.Options{Lookahead: 5 * time.Second})
	allow := e.every5(t, schedule.ConcurrencyAllow)
	forbid := e.every5(t, schedule.ConcurrencyForbid)
	five := time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC)

	e.clk.Set(five.Add(-6 * time.Second))
	n, err := e.sched.FireDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "further ahead than the lookahead")

	e.clk.Set(five.Add(-3 * time.Second))
	n, err = e.sched.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the allow schedule only")
	require.Len(t, e.runs(t, allow.ID), 1)
	require.Empty(t, e.runs(t, forbid.ID))
	due, err := e.st.NextDue(ctx, e.clk.Now())
	require.NoError(t, err)
	require.NotNil(t, due)
	require.Equal(t, five, due.UTC(), "queued, runnable from its instant")

	e.clk.Set(five)
	n, err = e.sched.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the forbid schedule, at its instant")
	require.Len(t, e.runs(t, allow.ID), 1, "not fired twice")
	require.Len(t, e.runs(t, forbid.ID), 1)
}

// TestRunFiresWhenWoken: the firing loop sleeps until the next due schedule (on its clock) or a
// wake-up, and then fires what is due.
func TestRunFiresWhenWoken(t *testing.T) {
	e := newFireEnv(t, scheduler.Options{Poll: time.Hour})
	sch := e.every5(t, schedule.ConcurrencyForbid)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.sched.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	e.clk.Set(time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC))
	e.sched.Wake()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.runs(t, sch.ID)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the woken loop did not fire the due schedule")
		}
		time.Sleep(time.Millisecond)
	}
	require.Len(t, e.runs(t, sch.ID), 1)
}
