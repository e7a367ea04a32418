package invoke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/registry"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tenancy"
)

const fnPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing."

type env struct {
	t     testing.TB
	store store.Store
	clock *clock.Fake
	reg   *registry.Service
	ten   *tenancy.Service
	svc   *invoke.Service
	cfg   invoke.Config
	// claimers are the claim stages feeding each service the test made (one per service, as in a
	// server, so that fairness carries over from claim to claim).
	claimers map[*invoke.Service]*dispatch.StoreClaimer
}

// claimerOf is the claim stage feeding svc: a dispatch.StoreClaimer over its store, catalog, node
// and lease grace.
func (e *env) claimerOf(svc *invoke.Service) *dispatch.StoreClaimer {
	if e.claimers == nil {
		e.claimers = map[*invoke.Service]*dispatch.StoreClaimer{}
	}
	c := e.claimers[svc]
	if c == nil {
		c = dispatch.NewStoreClaimer(svc.ClaimConfig())
		e.claimers[svc] = c
	}
	return c
}

var (
	operatorSC = auth.SecurityContext{SubjectID: "operator", Operator: true}
	dev        = auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleDeveloper}}
	bob        = auth.SecurityContext{TenantID: "acme", SubjectID: "bob", Roles: []auth.Role{auth.RoleOperator}}
)

func newEnv(t testing.TB) *env {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "i.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	schemas, err := schema.New()
	require.NoError(t, err)
	c := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ids := idgen.UUIDv7{}
	e := &env{t: t, store: st, clock: c, reg: registry.NewService(st, schemas, c, ids, nil), ten: tenancy.NewService(st, c, ids)}
	blobs, err := blob.OpenDir(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, blobs.Close()) })
	e.cfg = invoke.Config{Store: st, Schemas: schemas, Programs: sandbox.NewCache(64), Egress: egress.New(egress.Options{AllowLoopback: true}),
		Clock: c, IDs: ids, Node: "node-a", Blobs: blobs}
	e.svc = invoke.NewService(e.cfg)
	t.Cleanup(func() { e.svc.Close() })
	_, err = e.ten.Enable(context.Background(), operatorSC, "acme", []byte(`{"governance":{"allowed_outbound_domains":["*"]}}`))
	require.NoError(t, err)
	return e
}

// reconfigure replaces the service with one whose configuration mutate has changed.
func (e *env) reconfigure(mutate func(*invoke.Config)) {
	e.t.Helper()
	e.svc.Close()
	cfg := e.cfg
	mutate(&cfg)
	e.svc = invoke.NewService(cfg)
	e.t.Cleanup(e.svc.Close)
}

// fn registers and activates a function; mutate edits the registration body.
func (e *env) fn(name, source string, mutate func(map[string]any)) entrypoint.Entrypoint {
	e.t.Helper()
	return e.fnAs(dev, name, source, mutate)
}

// fnAs is fn for the tenant and subject of sc.
func (e *env) fnAs(sc auth.SecurityContext, name, source string, mutate func(map[string]any)) entrypoint.Entrypoint {
	e.t.Helper()
	body := map[string]any{
		"entrypoint_id": fnPrefix + name + ".v1~", "title": name, "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []any{"sync", "async"}, "default": "sync"},
			"retry":  map[string]any{"max_attempts": 1},
			"limits": map[string]any{"timeout_seconds": 5}},
		"implementation": map[string]any{"adapter": schema.StarlarkAdapter, "kind": "code",
			"code": map[string]any{"language": "starlark", "source": source}},
	}
	if mutate != nil {
		mutate(body)
	}
	var m map[string]any
	b, err := json.Marshal(body)
	require.NoError(e.t, err)
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	require.NoError(e.t, dec.Decode(&m))
	ep, _, err := e.reg.Register(context.Background(), sc, m)
	require.NoError(e.t, err)
	ep, err = e.reg.ChangeStatus(context.Background(), sc, ep.ID, registry.StatusRequest{Action: entrypoint.ActionActivate})
	require.NoError(e.t, err)
	return ep
}

func (e *env) start(sc auth.SecurityContext, req invoke.StartRequest, opt invoke.StartOptions) (invoke.Started, error) {
	return e.svc.Start(context.Background(), sc, req, opt)
}

// drain runs every claimable attempt now, as the dispatcher would.
func (e *env) Drain() int {
	e.t.Helper()
	n := 0
	for {
		claimed, err := e.claimerOf(e.svc).Claim(context.Background(), 16)
		require.NoError(e.t, err)
		if len(claimed) == 0 {
			return n
		}
		for _, a := range claimed {
			e.svc.Runner().Run(context.Background(), a)
			n++
		}
	}
}

func (e *env) timelineTypes(id string) []string {
	_, evs, err := e.svc.Events(context.Background(), dev, id)
	require.NoError(e.t, err)
	var out []string
	for _, ev := range api.Timeline(evs) {
		out = append(out, ev.EventType)
	}
	return out
}

const taxSource = "def main(ctx, input):\n  return {\"tax\": input.amount * 0.1, \"total\": input.amount * 1.1}\n"

func TestSyncCalculateTax(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("calculate_tax", taxSource, func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"type": "object", "required": []any{"amount"},
			"properties": map[string]any{"amount": map[string]any{"type": "number"}}},
			"returns": map[string]any{"type": "object", "properties": map[string]any{"tax": map[string]any{"type": "number"}}}}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Params: json.RawMessage(`{"amount": 100}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	r := st.Record
	require.Equal(t, invocation.StatusSucceeded, r.Status)
	var out struct{ Tax, Total float64 }
	require.NoError(t, json.Unmarshal(r.Result, &out))
	require.InDelta(t, 10, out.Tax, 1e-9)
	require.InDelta(t, 110, out.Total, 1e-9)
	require.Equal(t, "1.0.0", r.EntrypointVersion)
	require.NotNil(t, r.Metrics.DurationMS)
	require.NotNil(t, r.Metrics.StepCount)
	require.Equal(t, int64(128), *r.Metrics.MemoryLimitMB)
	require.NotEmpty(t, r.CorrelationID)
	require.Len(t, r.TraceID, 32)
	require.Equal(t, []string{"created", "started", "succeeded"}, e.timelineTypes(r.ID))

	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Params: json.RawMessage(`{"amount": "x"}`)}, invoke.StartOptions{})
	pe := problem.From(err)
	require.Equal(t, 422, pe.Status)
	require.Equal(t, "$.params.amount", pe.Issues[0].Path)
}

func TestReturnsMismatchIsValidationError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("bad_return", "def main(ctx, input):\n  return {\"tax\": \"ten\"}\n", func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"type": "object"},
			"returns": map[string]any{"type": "object", "properties": map[string]any{"tax": map[string]any{"type": "number"}}}}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "bad_return.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusDeadLettered, st.Record.Status)
	require.Equal(t, sandbox.ErrValidation, st.Record.Error.TypeID)
	require.Equal(t, []string{"created", "started", "failed", "dead_lettered"}, e.timelineTypes(st.Record.ID))
}

func TestAsyncRunsThroughTheQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("calculate_tax", taxSource, nil)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Mode: "async", Params: json.RawMessage(`{"amount": 5}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.True(t, st.Queued)
	require.Equal(t, invocation.StatusQueued, st.Record.Status)
	require.Equal(t, 1, e.Drain())
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status)
	require.Zero(t, e.Drain(), "nothing left")
}

func retryingFn(e *env, name, source string, retry map[string]any) {
	e.fn(name, source, func(b map[string]any) {
		b["traits"].(map[string]any)["retry"] = retry
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
	})
}

// TestRetriesWithBackoff: a retryable failure is retried after capped exponential backoff, each retry
// on the timeline, then failed and dead-lettered; retry (redrive) queues a new logical attempt.
func TestRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	retryingFn(e, "flaky", "def main(ctx, input):\n  fail(\"boom on attempt %d\" % ctx.attempt)\n",
		map[string]any{"max_attempts": 3, "initial_delay_ms": 1000, "max_delay_ms": 1500, "backoff_multiplier": 2.0})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "flaky.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	id := st.Record.ID
	require.Equal(t, 1, e.Drain())
	r, _ := e.svc.Get(context.Background(), bob, id)
	require.Equal(t, invocation.StatusQueued, r.Status, "retry scheduled")
	require.Equal(t, 2, r.Attempt)
	require.Zero(t, e.Drain(), "not before the backoff")
	due, err := e.store.NextDue(context.Background(), time.Time{})
	require.NoError(t, err)
	require.Equal(t, e.clock.Now().Add(time.Second), *due, "first delay = initial_delay_ms")
	e.clock.Advance(time.Second)
	require.Equal(t, 1, e.Drain())
	due, _ = e.store.NextDue(context.Background(), time.Time{})
	require.Equal(t, e.clock.Now().Add(1500*time.Millisecond), *due, "second delay 2000 ms capped at max_delay_ms")
	e.clock.Advance(1500 * time.Millisecond)
	require.Equal(t, 1, e.Drain())
	r, _ = e.svc.Get(context.Background(), bob, id)
	require.Equal(t, invocation.StatusDeadLettered, r.Status)
	require.Equal(t, 3, r.Attempt)
	require.Contains(t, r.Error.Message, "boom on attempt 3")
	require.Equal(t, sandbox.ErrRuntime, r.Error.TypeID)
	require.Equal(t, []string{"created", "started", "step_retried", "started", "step_retried", "started", "failed", "dead_lettered"}, e.timelineTypes(id))

	r, created, err := e.svc.Control(context.Background(), bob, id, invoke.ActionRetry)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, invocation.StatusQueued, r.Status)
	require.Equal(t, 4, r.Attempt, "redrive is the next logical attempt")

	// The retry starts a new budget of max_attempts (3): attempts 4, 5 and 6, with the policy's
	// backoff from its start, then dead-lettered again.
	require.Equal(t, 1, e.Drain())
	r, _ = e.svc.Get(context.Background(), bob, id)
	require.Equal(t, invocation.StatusQueued, r.Status, "the retried run is retried by the policy")
	require.Equal(t, 5, r.Attempt)
	due, _ = e.store.NextDue(context.Background(), time.Time{})
	require.Equal(t, e.clock.Now().Add(time.Second), *due, "the backoff starts again at initial_delay_ms")
	e.clock.Advance(time.Second)
	require.Equal(t, 1, e.Drain())
	e.clock.Advance(1500 * time.Millisecond)
	require.Equal(t, 1, e.Drain())
	r, _ = e.svc.Get(context.Background(), bob, id)
	require.Equal(t, invocation.StatusDeadLettered, r.Status)
	require.Equal(t, 6, r.Attempt)
	require.Contains(t, r.Error.Message, "boom on attempt 6")
	require.Zero(t, e.Drain(), "nothing left")
}

// TestRetryPrecedence: only retryable categories whose type is not listed in non_retryable_errors are retried.
func TestRetryPrecedence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, source string
		nonRetryable []any
		wantAttempts int
	}{
		{"retryable", "def main(ctx, input):\n  fail(\"x\")\n", nil, 2},
		{"listed", "def main(ctx, input):\n  fail(\"x\")\n", []any{sandbox.ErrRuntime}, 1},
		{"non_retryable", "def main(ctx, input):\n  r_exit({\"id\": \"gts.x.core.serverless.err.v1~vendor.app.x.declined.v1~\", \"message\": \"no\", \"category\": \"non_retryable\"})\n", nil, 1},
		{"exit_retryable", "def main(ctx, input):\n  r_exit({\"id\": \"gts.x.core.serverless.err.v1~vendor.app.x.busy.v1~\", \"message\": \"busy\", \"category\": \"retryable\"})\n", nil, 2},
		{"cpu", "def main(ctx, input):\n  n = 0\n  while True:\n    n += 1\n", nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			retry := map[string]any{"max_attempts": 2, "initial_delay_ms": 0}
			if c.nonRetryable != nil {
				retry["non_retryable_errors"] = c.nonRetryable
			}
			retryingFn(e, "f", c.source, retry)
			st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "f.v1~"}, invoke.StartOptions{})
			require.NoError(t, err)
			e.Drain()
			r, _ := e.svc.Get(context.Background(), bob, st.Record.ID)
			require.Equal(t, invocation.StatusDeadLettered, r.Status)
			require.Equal(t, c.wantAttempts, r.Attempt, r.Error)
		})
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("calculate_tax", taxSource, nil)
	req := invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Mode: "async", Params: json.RawMessage(`{"amount": 1}`)}
	first, err := e.start(bob, req, invoke.StartOptions{IdempotencyKey: "k1"})
	require.NoError(t, err)
	again, err := e.start(bob, invoke.StartRequest{EntrypointID: req.EntrypointID, Mode: "async", Params: json.RawMessage(`{ "amount" : 1 }`)}, invoke.StartOptions{IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Record.ID, again.Record.ID)
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: req.EntrypointID, Mode: "async", Params: json.RawMessage(`{"amount": 2}`)}, invoke.StartOptions{IdempotencyKey: "k1"})
	require.Equal(t, 422, problem.From(err).Status, "same key, different request")

	// 100 parallel identical requests create exactly one invocation.
	var wg sync.WaitGroup
	ids := make([]string, 100)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := e.start(bob, req, invoke.StartOptions{IdempotencyKey: "k-par"})
			if err == nil {
				ids[i] = st.Record.ID
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	page, err := e.svc.List(context.Background(), bob, store.ListQuery{Limit: 200})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "k1 and k-par: one invocation each")

	// The window ends: the key starts a new invocation.
	e.clock.Advance(25 * time.Hour)
	later, err := e.start(bob, req, invoke.StartOptions{IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.False(t, later.Replayed)
	require.NotEqual(t, first.Record.ID, later.Record.ID)
}

func TestResponseCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("cached", "def main(ctx, input):\n  return {\"n\": r_rand_v1()}\n", func(b map[string]any) {
		tr := b["traits"].(map[string]any)
		tr["is_idempotent"] = true
		tr["caching"] = map[string]any{"max_age_seconds": 60}
	})
	req := invoke.StartRequest{EntrypointID: fnPrefix + "cached.v1~"}
	first, err := e.start(bob, req, invoke.StartOptions{IdempotencyKey: "c1"})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, first.Record.Status)
	hit, err := e.start(bob, req, invoke.StartOptions{IdempotencyKey: "c1"})
	require.NoError(t, err)
	require.True(t, hit.Cached)
	require.Equal(t, first.Record.ID, hit.Record.ID, "the original record")
	require.JSONEq(t, string(first.Record.Result), string(hit.Record.Result))
	other := auth.SecurityContext{TenantID: "acme", SubjectID: "carol", Roles: []auth.Role{auth.RoleOperator}}
	shared, err := e.start(other, req, invoke.StartOptions{IdempotencyKey: "c1"})
	require.NoError(t, err)
	require.True(t, shared.Cached, "tenant-owned: the cache is shared within the tenant")
	page, _ := e.svc.List(context.Background(), bob, store.ListQuery{})
	require.Len(t, page.Items, 1, "cache hits create no invocation")
	noKey, err := e.start(bob, req, invoke.StartOptions{})
	require.NoError(t, err)
	require.False(t, noKey.Cached, "no Idempotency-Key, no caching")
	e.clock.Advance(61 * time.Second)
	fresh, err := e.start(bob, req, invoke.StartOptions{IdempotencyKey: "c1-after"})
	require.NoError(t, err)
	require.False(t, fresh.Cached)
	// Replay never reads the cache.
	rp, created, err := e.svc.Control(context.Background(), bob, first.Record.ID, invoke.ActionReplay)
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, first.Record.ID, rp.ID)
	require.Equal(t, invocation.StatusQueued, rp.Status)
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("calculate_tax", taxSource, func(b map[string]any) {
		b["schema"] = map[string]any{"params": map[string]any{"type": "object", "required": []any{"amount"}}}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Params: json.RawMessage(`{"amount": 1}`), DryRun: true}, invoke.StartOptions{IdempotencyKey: "d"})
	require.NoError(t, err)
	require.True(t, st.DryRun)
	require.True(t, strings.HasPrefix(st.Record.ID, "dryrun_"))
	require.Equal(t, invocation.StatusQueued, st.Record.Status)
	page, _ := e.svc.List(context.Background(), bob, store.ListQuery{})
	require.Empty(t, page.Items, "nothing persisted")
	// The key was not consumed: a real start with it and another request works.
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Params: json.RawMessage(`{"amount": 2}`)}, invoke.StartOptions{IdempotencyKey: "d"})
	require.NoError(t, err)
	// Checks in order: not found, not active, params, quota.
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "nope.v1~", DryRun: true}, invoke.StartOptions{})
	require.Equal(t, 404, problem.From(err).Status)
	ep, _ := e.reg.Get(context.Background(), dev, fnPrefix+"calculate_tax.v1~")
	_, err = e.reg.ChangeStatus(context.Background(), dev, ep.ID, registry.StatusRequest{Action: entrypoint.ActionDisable})
	require.NoError(t, err)
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Params: json.RawMessage(`{}`), DryRun: true}, invoke.StartOptions{})
	require.Equal(t, problem.TypeNotActive, problem.From(err).Type, "409 before 422")
	_, err = e.reg.ChangeStatus(context.Background(), dev, ep.ID, registry.StatusRequest{Action: entrypoint.ActionEnable})
	require.NoError(t, err)
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Params: json.RawMessage(`{}`), DryRun: true}, invoke.StartOptions{})
	require.Equal(t, 422, problem.From(err).Status)
	_, err = e.ten.Patch(context.Background(), operatorSC, "acme", []byte(`{"quotas":{"max_concurrent_executions":1}}`))
	require.NoError(t, err)
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Mode: "async", Params: json.RawMessage(`{"amount": 1}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Params: json.RawMessage(`{"amount": 1}`), DryRun: true}, invoke.StartOptions{})
	require.NoError(t, err, "queued work is not running: it holds no slot")
	claimed, err := e.claimerOf(e.svc).Claim(context.Background(), 4) // it runs now (the attempt is never run: it stays running)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Params: json.RawMessage(`{"amount": 1}`), DryRun: true}, invoke.StartOptions{})
	require.Equal(t, problem.TypeQuotaExceeded, problem.From(err).Type, "%v", err)
}

func TestCancelAndStateMachine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("calculate_tax", taxSource, nil)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Mode: "async", Params: json.RawMessage(`{"amount": 1}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	r, _, err := e.svc.Control(context.Background(), bob, st.Record.ID, invoke.ActionCancel)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusCanceled, r.Status)
	require.Zero(t, e.Drain(), "a canceled invocation never runs")
	for _, a := range []invoke.Action{invoke.ActionCancel, invoke.ActionRetry, invoke.ActionReplay} {
		_, _, err := e.svc.Control(context.Background(), bob, st.Record.ID, a)
		require.Equal(t, 409, problem.From(err).Status, "%s from canceled", a)
	}
	_, _, err = e.svc.Control(context.Background(), bob, st.Record.ID, "suspend")
	require.Equal(t, 409, problem.From(err).Status)
	_, _, err = e.svc.Control(context.Background(), bob, "inv_missing", invoke.ActionCancel)
	require.Equal(t, 404, problem.From(err).Status)
	other := auth.SecurityContext{TenantID: "zeta", SubjectID: "z", Roles: []auth.Role{auth.RoleAdmin}}
	_, err = e.svc.Get(context.Background(), other, st.Record.ID)
	require.Equal(t, 404, problem.From(err).Status, "another tenant's invocation is not found")
}

// TestVersionPinning: an invocation keeps the exact version it started with (BR-030).
func TestVersionPinning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v1 := e.fn("pinned", "def main(ctx, input):\n  return {\"v\": 1}\n", func(b map[string]any) {
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "pinned.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, v1.GTSID, st.Record.EntrypointID)
	e.fn("pinned", "def main(ctx, input):\n  return {\"v\": 2}\n", func(b map[string]any) {
		b["entrypoint_id"] = fnPrefix + "pinned.v1.1~"
		b["traits"].(map[string]any)["invocation"] = map[string]any{"supported": []any{"async"}, "default": "async"}
	})
	_, err = e.reg.ChangeStatus(context.Background(), dev, v1.ID, registry.StatusRequest{Action: entrypoint.ActionDisable})
	require.NoError(t, err)
	e.Drain()
	r, _ := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.Equal(t, invocation.StatusSucceeded, r.Status)
	require.JSONEq(t, `{"v":1}`, string(r.Result), "ran the version it was started with, though disabled since")
	next, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "pinned.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, fnPrefix+"pinned.v1.1~", next.Record.EntrypointID, "major-only resolves to the latest active minor")
}

// TestLeaseRecovery: work claimed by a runner that died is reclaimed after its lease; the dead
// runner's late result is recorded but not applied.
func TestLeaseRecovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("calculate_tax", taxSource, func(b map[string]any) {
		b["traits"].(map[string]any)["limits"] = map[string]any{"timeout_seconds": 2}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Mode: "async", Params: json.RawMessage(`{"amount": 1}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	claimedAt := e.clock.Now()
	claimed, err := e.claimerOf(e.svc).Claim(context.Background(), 1) // node-a claims, then "dies"
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	// A claim is data: the started record, the lease taken (timeout + 30 s of grace) and the pinned version.
	a := claimed[0]
	require.Equal(t, attempt.KindRun, a.Kind)
	require.Equal(t, st.Record.ID, a.Invocation.ID)
	require.Equal(t, invocation.StatusRunning, a.Invocation.Status)
	require.Equal(t, attempt.Lease{Owner: "node-a/1/1", ExpiresAt: claimedAt.Add(32 * time.Second)}, a.Lease)
	require.Equal(t, a.Invocation.EntrypointRef, a.Entrypoint.ID)
	cfgB := e.cfg
	cfgB.Node = "node-b"
	b := invoke.NewService(cfgB)
	none, err := e.claimerOf(b).Claim(context.Background(), 1)
	require.NoError(t, err)
	require.Empty(t, none, "the lease holds")
	e.clock.Advance(2*time.Second + 30*time.Second)
	claimedB, err := e.claimerOf(b).Claim(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, claimedB, 1, "expired lease: reclaimed")
	require.Equal(t, "node-b/1/2", claimedB[0].Lease.Owner, "the next engine attempt, leased to the reclaiming process")
	b.Runner().Run(context.Background(), claimedB[0])
	e.svc.Runner().Run(context.Background(), claimed[0]) // the old runner wakes up and finishes late
	r, _ := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.Equal(t, invocation.StatusSucceeded, r.Status)
	require.Equal(t, 1, r.Attempt, "the logical attempt is unchanged by a re-dispatch")
	require.Equal(t, 2, r.EngineAttempt)
	require.Equal(t, []string{"created", "started", "reclaimed", "succeeded", "late_result"}, e.timelineTypes(st.Record.ID))
}

func TestChildInvocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("inner", "def main(ctx, input):\n  return {\"doubled\": input.n * 2}\n", func(b map[string]any) {
		b["traits"].(map[string]any)["entrypoint"] = false
	})
	e.fn("outer", "def main(ctx, input):\n  r = r_await(r_invoke_v1(\""+fnPrefix+"inner.v1~\", {\"n\": 21}, timeout_ms=2000))\n  return {\"ok\": r.ok, \"v\": r.value[\"doubled\"]}\n", nil)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "outer.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, st.Record.Status, st.Record.Error)
	require.JSONEq(t, `{"ok":true,"v":42}`, string(st.Record.Result))
	page, err := e.svc.List(context.Background(), bob, store.ListQuery{})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	var child invocation.Record
	for _, r := range page.Items {
		if r.ID != st.Record.ID {
			child = r
		}
	}
	require.Equal(t, st.Record.ID, child.ParentID, "a real, linked invocation")
	require.Equal(t, st.Record.CorrelationID, child.CorrelationID)
	require.Contains(t, e.timelineTypes(st.Record.ID), "child_invoked")
	_, err = e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "inner.v1~", Params: json.RawMessage(`{"n": 1}`)}, invoke.StartOptions{})
	require.Equal(t, 403, problem.From(err).Status, "internal entrypoints are callable only from code")
	_ = fmt.Sprint()
}

// TestRecoverLeases: a process that is its database's only user reclaims at start-up the work a
// stopped process held, without waiting for the leases (timeout + 30 s) to run out.
func TestRecoverLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("calculate_tax", taxSource, nil)
	st, err := e.start(dev, invoke.StartRequest{EntrypointID: fnPrefix + "calculate_tax.v1~", Mode: "async", Params: json.RawMessage(`{"amount": 10}`)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Len(t, e.claim(4), 1) // claimed, then the process "dies": its attempt never runs
	require.Empty(t, e.claim(4), "the lease holds")

	e.reconfigure(func(c *invoke.Config) { c.Node = "node-b" }) // the restarted process
	n, err := e.svc.Runner().RecoverLeases(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	claimed := e.claim(4)
	require.Len(t, claimed, 1, "reclaimed at once")
	e.svc.Runner().Run(context.Background(), claimed[0])
	rec, err := e.svc.Get(context.Background(), dev, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, rec.Status)
	require.Contains(t, e.timelineTypes(rec.ID), "reclaimed")
}
