package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/store/storetest"
)

// TestAdminProjections runs `lark admin projections verify|rebuild` on a data directory: clean →
// exit 0; a damaged status → the difference on stdout (text or JSON) and exit 1; rebuild → exit 0,
// then verify is clean.
func TestAdminProjections(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "lark.db"), sqlstore.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		created := storetest.NewInvocationEvent("inv_1", "acme", "ep_1", at)
		started := invocation.Event{Type: invocation.EventStarted, At: at.Add(time.Second), EngineAttempt: 1, LogicalAttempt: 1,
			IdempotencyKey: invocation.IdempotencyKey("inv_1", "", 1, invocation.EventStarted, "")}
		_, err := tx.StartInvocation([]invocation.Event{created, started}, store.Scheduling{})
		return err
	}))
	require.NoError(t, st.Close())

	run := func(rebuild bool, f projectionFlags) (string, string, error) {
		var out, errOut bytes.Buffer
		if f.data == "" {
			f.data = dir
		}
		if f.store == "" {
			f.store = "sqlite"
		}
		if f.pageSize == 0 {
			f.pageSize = 200
		}
		err := runProjections(ctx, &out, &errOut, f, rebuild, at.Add(time.Hour))
		return out.String(), errOut.String(), err
	}
	out, summary, err := run(false, projectionFlags{})
	require.NoError(t, err)
	require.Empty(t, out)
	require.Contains(t, summary, "1 invocations and 1 usage aggregates checked, 0 differences")

	// The same through the command line.
	cmd := root()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"admin", "projections", "verify", "--data", dir, "--page-size", "1"})
	require.NoError(t, cmd.Execute())
	require.Contains(t, stderr.String(), "0 differences")

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "lark.db"))
	require.NoError(t, err)
	_, err = db.Exec("UPDATE invocations SET status = 'succeeded' WHERE id = 'inv_1'")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	out, _, err = run(false, projectionFlags{})
	require.ErrorIs(t, err, errDiffs)
	require.Equal(t, `invocation inv_1: column status: stored "succeeded", recomputed "running"`+"\n", out)
	out, _, err = run(false, projectionFlags{json: true, tenant: "acme", since: "2h"})
	require.ErrorIs(t, err, errDiffs)
	var d map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	require.Equal(t, map[string]any{"projection": "invocation", "tenant_id": "acme", "invocation_id": "inv_1",
		"field": "column status", "stored": `"succeeded"`, "recomputed": `"running"`}, d)
	out, _, err = run(false, projectionFlags{since: "2026-03-04T06:00:00Z"})
	require.NoError(t, err, "updated before --since: not looked at")
	require.Empty(t, out)

	out, summary, err = run(true, projectionFlags{})
	require.NoError(t, err)
	require.Contains(t, out, "column status")
	require.Contains(t, summary, "rebuilt 1 invocations and 0 usage hours")
	_, _, err = run(false, projectionFlags{})
	require.NoError(t, err)

	for _, bad := range []struct {
		f    projectionFlags
		want string
	}{
		{projectionFlags{since: "yesterday"}, "--since"},
		{projectionFlags{pageSize: -1}, "--page-size"},
		{projectionFlags{store: "mysql://x"}, "--store"},
		{projectionFlags{data: filepath.Join(dir, "missing")}, "--data"},
	} {
		_, _, err := run(false, bad.f)
		require.Error(t, err)
		require.True(t, strings.Contains(err.Error(), bad.want), "%v", err)
	}
}
