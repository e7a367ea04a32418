package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/idgen"
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
	"github.com/larkrun/lark/internal/tenant"
)

// tenantReadFails is a store whose read of one tenant's policy fails, as a row that no longer
// decodes would.
type tenantReadFails struct {
	store.Store
	tenantID string
}

var errBadRow = errors.New("malformed JSON")

func (s tenantReadFails) Tenant(ctx context.Context, id string) (tenant.Policy, error) {
	if id == s.tenantID {
		return tenant.Policy{}, errBadRow
	}
	return s.Store.Tenant(ctx, id)
}

type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(job string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[job]++
}

func (c *counter) get(job string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[job]
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestFailingScheduleDoesNotStopOthers: schedules of a tenant whose firing fails are logged with
// the tenant id, counted and passed over; the schedules of the other tenants due in the same batch
// (and after it) still fire.
func TestFailingScheduleDoesNotStopOthers(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "s.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	schemas, err := schema.New()
	require.NoError(t, err)
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ids := idgen.UUIDv7{}
	reg := registry.NewService(st, schemas, clk, ids, nil)
	ten := tenancy.NewService(st, clk, ids)
	inv := invoke.NewService(invoke.Config{Store: st, Schemas: schemas, Programs: sandbox.NewCache(8),
		Egress: egress.New(egress.Options{}), Clock: clk, IDs: ids, Node: "n"})
	t.Cleanup(inv.Close)
	operator := auth.SecurityContext{SubjectID: "operator", Operator: true}
	good := scheduler.New(st, inv, scheduler.Options{Clock: clk, IDs: ids, Batch: 2})

	for _, tid := range []string{"aaa", "zzz"} {
		_, err := ten.Enable(ctx, operator, tid, nil)
		require.NoError(t, err)
		sc := auth.SecurityContext{TenantID: tid, SubjectID: "alice", Roles: []auth.Role{auth.RoleDeveloper, auth.RoleOperator}}
		var body map[string]any
		dec := json.NewDecoder(strings.NewReader(`{"entrypoint_id": "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.tick.v1~",
			"title": "tick", "owner": {"owner_type": "tenant"}, "schema": {"params": {"type": "object"}},
			"traits": {"invocation": {"supported": ["async"], "default": "async"}, "retry": {"max_attempts": 1}, "limits": {"timeout_seconds": 5}},
			"implementation": {"adapter": "` + schema.StarlarkAdapter + `", "kind": "code",
				"code": {"language": "starlark", "source": "def main(ctx, input):\n  return {}\n"}}}`))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&body))
		ep, _, err := reg.Register(ctx, sc, body)
		require.NoError(t, err, "%+v", problem.From(err).Issues)
		_, err = reg.ChangeStatus(ctx, sc, ep.ID, registry.StatusRequest{Action: entrypoint.ActionActivate})
		require.NoError(t, err)
		for range 3 { // more than a batch: the failing ones must not hide the rest
			_, err = good.Create(ctx, sc, scheduler.Spec{EntrypointID: ep.GTSID, Expression: &schedule.Expression{Kind: "cron", Value: "*/5 * * * *"}})
			require.NoError(t, err)
		}
	}

	logs := &syncBuffer{}
	fails := &counter{n: map[string]int{}}
	bad := scheduler.New(tenantReadFails{Store: st, tenantID: "aaa"}, inv, scheduler.Options{Clock: clk, IDs: ids, Batch: 2,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Failed: fails.add})
	clk.Set(clk.Now().Add(5 * time.Minute))
	n, err := bad.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "zzz's three schedules fire")
	require.Equal(t, 3, fails.get(scheduler.JobScheduler), "aaa's three schedules are counted")
	require.Contains(t, logs.String(), `"msg":"firing a schedule failed","tenant_id":"aaa"`)
	require.Contains(t, logs.String(), "malformed JSON")

	n, err = good.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "aaa's schedules stayed due and fire once the tenant reads again")
}
