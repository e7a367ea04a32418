package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// testCatalogGeneration: the generation moves once Update returns from a committed write to the
// entrypoints or tenants table (insert, update, delete, put tenant), never on reads or on writes to
// other tables (the invocation path writes on every request; it must not flush the caches).
func testCatalogGeneration(t *testing.T, s store.Store) {
	ctx := context.Background()
	moved := func(name string, want bool, fn func(store.Tx) error) {
		t.Helper()
		before := s.CatalogGeneration()
		update(t, s, fn)
		after := s.CatalogGeneration()
		if want {
			require.Greater(t, after, before, name)
		} else {
			require.Equal(t, before, after, name)
		}
	}
	p := tenant.New("acme", t0)
	p.Enabled = true
	moved("put tenant", true, func(tx store.Tx) error { return tx.PutTenant(p) })
	e := NewEntrypoint("ep_1", "acme", entrypoint.OwnerTenant, "alice", "tax", 1, 0, false, t0)
	moved("insert entrypoint", true, func(tx store.Tx) error { return tx.InsertEntrypoint(e) })
	moved("update entrypoint", true, func(tx store.Tx) error {
		cur, err := tx.EntrypointByRef("ep_1")
		if err != nil {
			return err
		}
		cur.Status = entrypoint.StatusActive
		return tx.UpdateEntrypoint(&cur)
	})

	moved("reads", false, func(tx store.Tx) error {
		if _, err := tx.Tenant("acme"); err != nil {
			return err
		}
		_, err := tx.EntrypointByRef("ep_1")
		return err
	})
	moved("invocation start and append", false, func(tx store.Tx) error {
		if _, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_g", "acme", "ep_1", t0)}, store.Scheduling{}); err != nil {
			return err
		}
		_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_g", Events: []invocation.Event{ev("inv_g", invocation.EventLog, "hello", `{}`, t0.Add(time.Millisecond))}})
		return err
	})
	before := s.CatalogGeneration()
	_, err := s.Tenant(ctx, "acme")
	require.NoError(t, err)
	_, err = s.LatestActive(ctx, entrypoint.Viewer{TenantID: "acme"}, e.Family, 1)
	require.NoError(t, err)
	require.Equal(t, before, s.CatalogGeneration(), "store reads")

	// A failed write rolls back; moving the generation then is allowed (a cache miss), so only the
	// committed writes are asserted on.
	err = s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutTenant(p); err != nil {
			return err
		}
		return errors.New("changed my mind")
	})
	require.Error(t, err)

	moved("delete entrypoint", true, func(tx store.Tx) error { return tx.DeleteEntrypoint("ep_1") })
}
