package workerhub

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/workerproto"
)

// TestRecordWorkers: polls and heartbeats are noted in memory and written by Record, one row per
// worker however many requests it made; a worker shows online for 30 s after it was last seen,
// with the tasks it holds here now; a tenant sees the workers its tenant's tasks may go to.
func TestRecordWorkers(t *testing.T) {
	t.Parallel()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "lark.db"), sqlstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	clk := clock.NewFake(time.Now().UTC().Truncate(time.Millisecond))
	s := New(Config{Functions: true, HeartbeatTimeout: time.Hour, Runner: &run.Runner{Clock: clk}, Clock: clk,
		Node: "n1", Store: st, Bindings: Bindings{"kacme": {"acme": true}}})
	ctx := WithKey(context.Background(), "kacme")
	first := clk.Now()
	_, err = s.Poll(ctx, workerproto.PollRequest{WorkerID: "w1", MaxTasks: 1, Concurrency: 4, Version: "1.2.0"})
	require.NoError(t, err)
	for range 5 {
		clk.Advance(time.Second)
		_, err = s.Heartbeat(ctx, workerproto.Heartbeat{WorkerID: "w1"})
		require.NoError(t, err)
	}
	operator := auth.SecurityContext{Operator: true}
	list := func(sc auth.SecurityContext) []WorkerView {
		t.Helper()
		page, err := s.Workers(context.Background(), sc, store.ListQuery{})
		require.NoError(t, err)
		return page.Items
	}
	require.Empty(t, list(operator), "nothing is written before Record")
	require.NoError(t, s.Record(context.Background()))
	require.NoError(t, s.Record(context.Background()))
	require.Equal(t, int64(1), s.Stats().Recorded, "one row for six requests; nothing new, nothing written")
	require.Equal(t, []WorkerView{{WorkerID: "w1", Node: "n1", KeyID: "kacme", Tenants: []string{"acme"}, Status: "online", Capacity: 4,
		Version: "1.2.0", FirstSeenAt: first, LastSeenAt: first.Add(5 * time.Second)}}, list(operator))

	// A task it takes shows at once on this node, before any write.
	done := start(s, remoteAttempt("inv_1", "", clk.Now().Add(time.Hour)))
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queue) == 1 }, 5*time.Second, time.Millisecond)
	s.cfg.Bindings["kacme"]["t1"] = true // the attempt's tenant
	tasks := poll(t, s, workerproto.PollRequest{WorkerID: "w1", Starlark: true})
	require.Len(t, tasks, 1)
	require.Equal(t, 1, list(operator)[0].TasksHeld)

	acme := auth.SecurityContext{TenantID: "acme", Roles: []auth.Role{auth.RoleOperator}}
	require.Len(t, list(acme), 1, "a tenant sees the workers bound to it")
	require.Empty(t, list(auth.SecurityContext{TenantID: "beta", Roles: []auth.Role{auth.RoleAdmin}}), "and not the others'")
	_, err = s.Workers(context.Background(), auth.SecurityContext{TenantID: "acme", Roles: []auth.Role{auth.RoleViewer}}, store.ListQuery{})
	var p *problem.Error
	require.True(t, errors.As(err, &p))
	require.Equal(t, http.StatusForbidden, p.Status, "a viewer may not")

	clk.Advance(OnlineWindow + time.Second)
	got := list(operator)[0]
	require.Equal(t, StatusOffline, got.Status, "not seen for 30 s")
	require.NoError(t, s.Result(ctx, tasks[0].ID, workerproto.Result{TaskID: tasks[0].ID, WorkerID: "w1", LeaseOwner: tasks[0].LeaseOwner,
		Output: []byte(`{}`)}))
	<-done
	require.Equal(t, 0, list(operator)[0].TasksHeld, "its result given, it holds nothing")
}
