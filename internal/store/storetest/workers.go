package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// testWorkers: a worker's row is upserted by (worker id, node), keeping its first sighting; a tenant
// sees the unbound workers and those bound to it; status filters on the last sighting; the purge
// deletes the rows not seen since its cutoff, a bounded batch at a time.
func testWorkers(t *testing.T, s store.Store) {
	ctx := context.Background()
	w := func(id, node, kid string, tenants []string, last time.Time) store.Worker {
		return store.Worker{WorkerID: id, Node: node, KeyID: kid, Tenants: tenants, Capacity: 4, Version: "v1",
			TasksHeld: 1, FirstSeenAt: last, LastSeenAt: last}
	}
	update(t, s, func(tx store.Tx) error {
		return tx.RecordWorkers([]store.Worker{w("w1", "n1", "k", nil, t0), w("w1", "n2", "k", nil, t0.Add(time.Minute)),
			w("w2", "n1", "kacme", []string{"acme"}, t0.Add(2*time.Minute)), w("w3", "n1", "kbeta", []string{"beta", "gamma"}, t0)})
	})
	again := w("w1", "n1", "k2", []string{"acme"}, t0.Add(3*time.Minute))
	again.TasksHeld, again.Capacity, again.Version = 3, 8, "v2"
	update(t, s, func(tx store.Tx) error { return tx.RecordWorkers([]store.Worker{again}) })

	list := func(tenantID, filter string) []store.Worker {
		t.Helper()
		q := store.WorkerQuery{TenantID: tenantID, OnlineSince: t0.Add(time.Minute)}
		if filter != "" {
			f, err := odata.ParseFilter(filter)
			require.NoError(t, err)
			q.Filter = f
		}
		page, err := s.ListWorkers(ctx, q)
		require.NoError(t, err)
		return page.Items
	}
	all := list("", "")
	require.Len(t, all, 4)
	want := again
	want.FirstSeenAt = t0 // the first sighting stays
	require.Equal(t, want, all[0], "upserted by worker id and node")
	require.Equal(t, "n2", all[1].Node)
	require.Equal(t, []string{}, all[1].Tenants, "an unbound key has no tenants")
	ids := func(ws []store.Worker) (out []string) {
		for _, w := range ws {
			out = append(out, w.WorkerID+"@"+w.Node)
		}
		return out
	}
	require.Equal(t, []string{"w1@n1", "w1@n2", "w2@n1"}, ids(list("acme", "")), "acme: bound to it, or unbound")
	require.Equal(t, []string{"w1@n2", "w3@n1"}, ids(list("gamma", "")))
	require.Equal(t, []string{"w1@n1", "w1@n2", "w2@n1"}, ids(list("", "status eq 'online'")))
	require.Equal(t, []string{"w3@n1"}, ids(list("", "status eq 'offline'")))
	require.Equal(t, []string{"w3@n1"}, ids(list("", "status ne 'online' and node eq 'n1'")))

	var n int64
	update(t, s, func(tx store.Tx) error {
		var err error
		n, err = tx.PurgeWorkers(t0.Add(90*time.Second), 1)
		return err
	})
	require.Equal(t, int64(1), n, "one batch of at most limit rows")
	update(t, s, func(tx store.Tx) error {
		var err error
		n, err = tx.PurgeWorkers(t0.Add(90*time.Second), 10)
		return err
	})
	require.Equal(t, int64(1), n)
	require.Equal(t, []string{"w1@n1", "w2@n1"}, ids(list("", "")), "the rows seen since the cutoff stay")
}
