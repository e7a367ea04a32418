package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRawLifecycles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lark.db")
	db, err := OpenSQLite(ctx, path, "FULL")
	require.NoError(t, err)
	record := `{"invocation_id":"inv_1","tenant_id":"bench","status":"succeeded","mode":"async","result":{"ok":true}}`
	_, err = db.Exec(`CREATE TABLE invocations (id TEXT PRIMARY KEY, status TEXT NOT NULL, record TEXT NOT NULL)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO invocations VALUES ('inv_0', 'failed', '{"status":"failed"}'), ('inv_1', 'succeeded', ?)`, record)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	res, err := RawLifecycles(ctx, path, "normal", 2500, 1000)
	require.NoError(t, err)
	require.Equal(t, 2500, res.Rows)
	require.Equal(t, "NORMAL", res.Synchronous)
	require.Equal(t, len(record), res.RecordLen, "a succeeded record is the sample")
	for _, v := range []float64{res.TotalS, res.LifecycleRate, res.InsertRate, res.RunningRate, res.SucceededRate} {
		require.Positive(t, v)
	}
	require.InDelta(t, 2500/res.TotalS, res.LifecycleRate, 1e-6)

	db, err = OpenSQLite(ctx, path, "normal")
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`PRAGMA synchronous`).Scan(&n))
	require.Equal(t, 1, n, "NORMAL, as lark serve --sqlite-synchronous normal")
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE 'lark_bench_raw%'`).Scan(&n))
	require.Zero(t, n, "the scratch table and its index are dropped")
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM invocations`).Scan(&n))
	require.Equal(t, 2, n, "the real rows are untouched")

	_, err = RawLifecycles(ctx, filepath.Join(t.TempDir(), "empty.db"), "FULL", 10, 10)
	require.Error(t, err, "no invocations table, no sample record")
	_, err = OpenSQLite(ctx, path, "OFF")
	require.ErrorContains(t, err, "FULL or NORMAL")
}

func TestWithStatus(t *testing.T) {
	require.Equal(t, `{"a":1,"status":"queued","b":"x"}`, withStatus(`{"a":1,"status":"succeeded","b":"x"}`, "queued"))
	require.Equal(t, `{"a":1}`, withStatus(`{"a":1}`, "queued"))
	require.Equal(t, `{"status":"running"}`, withStatus(`{"status":"dead_lettered"}`, "running"))
}
