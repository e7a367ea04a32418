package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// testTenantLoads: the scrape-time view of each tenant's work, queue and quotas.
func testTenantLoads(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := t0.Add(time.Minute)
	loads, err := s.TenantLoads(ctx, now)
	require.NoError(t, err)
	require.Empty(t, loads, "no tenants, no loads")

	ten, defs := int64(10), int64(5)
	// inv creates an invocation of tenantID moved through events, with a queue state.
	inv := func(tx store.Tx, tenantID, id string, sched store.Scheduling, events ...invocation.EventType) error {
		if _, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, tenantID, "ep_"+tenantID, t0)}, store.Scheduling{}); err != nil {
			return err
		}
		for i, typ := range events {
			e := ev(id, typ, fmt.Sprint(i), "", t0)
			if _, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: []invocation.Event{e}}); err != nil {
				return fmt.Errorf("%s %s: %w", id, typ, err)
			}
		}
		return tx.SetScheduling(tenantID, id, sched)
	}
	update(t, s, func(tx store.Tx) error {
		acme := tenant.New("acme", t0)
		acme.Enabled = true
		acme.Quotas.MaxConcurrentExecutions, acme.Quotas.MaxDefinitions = &ten, &defs
		for _, p := range []tenant.Policy{tenant.New("idle", t0), tenant.New("globex", t0), acme} {
			if err := tx.PutTenant(p); err != nil {
				return err
			}
		}
		archived := NewEntrypoint("ep_a2", "acme", entrypoint.OwnerTenant, "u1", "old", 1, 0, false, t0)
		archived.Status = entrypoint.StatusArchived
		for _, e := range []entrypoint.Entrypoint{
			NewEntrypoint("ep_a1", "acme", entrypoint.OwnerTenant, "u1", "tax", 1, 0, false, t0),
			NewEntrypoint("ep_a3", "acme", entrypoint.OwnerTenant, "u1", "fee", 1, 0, false, t0), archived,
			NewEntrypoint("ep_g1", "globex", entrypoint.OwnerTenant, "u1", "tax", 1, 0, false, t0),
		} {
			if err := tx.InsertEntrypoint(e); err != nil {
				return err
			}
		}
		steps := []struct {
			tenant, id string
			sched      store.Scheduling
			events     []invocation.EventType
		}{
			{"acme", "inv_ready", store.Scheduling{AvailableAt: ptr(now)}, nil},
			{"acme", "inv_backoff", store.Scheduling{AvailableAt: ptr(now.Add(time.Second))}, nil},
			{"acme", "inv_timer", store.Scheduling{AvailableAt: ptr(now.Add(time.Hour))},
				[]invocation.EventType{invocation.EventStarted, invocation.EventSuspended}},
			{"acme", "inv_orphan", store.Scheduling{LeaseOwner: "dead", LeaseExpiresAt: ptr(now)}, []invocation.EventType{invocation.EventStarted}},
			{"acme", "inv_running", store.Scheduling{LeaseOwner: "live", LeaseExpiresAt: ptr(now.Add(time.Second))}, []invocation.EventType{invocation.EventStarted}},
			{"acme", "inv_done", store.Scheduling{}, []invocation.EventType{invocation.EventStarted, invocation.EventSucceeded}},
			{"acme", "inv_canceled", store.Scheduling{}, []invocation.EventType{invocation.EventCanceled}},
			{"globex", "inv_g", store.Scheduling{AvailableAt: ptr(t0)}, nil},
			{"ghost", "inv_ghost", store.Scheduling{AvailableAt: ptr(t0)}, nil}, // no policy: not a tenant
		}
		for _, st := range steps {
			if err := inv(tx, st.tenant, st.id, st.sched, st.events...); err != nil {
				return err
			}
		}
		return nil
	})
	loads, err = s.TenantLoads(ctx, now)
	require.NoError(t, err)
	require.Equal(t, []store.TenantLoad{
		{TenantID: "acme", Ready: 1, Delayed: 2, LeaseExpired: 1, Definitions: 2,
			InFlight: map[invocation.Status]int64{invocation.StatusQueued: 2, invocation.StatusRunning: 2, invocation.StatusSuspended: 1},
			Quotas:   tenant.Quotas{MaxConcurrentExecutions: &ten, MaxDefinitions: &defs}},
		{TenantID: "globex", Ready: 1, Definitions: 1, InFlight: map[invocation.Status]int64{invocation.StatusQueued: 1}},
		{TenantID: "idle"},
	}, loads, "ordered by tenant id; due at now is ready; terminal and archived rows do not count")

	// Time moves on: the backoff falls due, and the live lease expires.
	loads, err = s.TenantLoads(ctx, now.Add(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, int64(2), loads[0].Ready)
	require.Equal(t, int64(1), loads[0].Delayed)
	require.Equal(t, int64(2), loads[0].LeaseExpired)

	// A claim takes work off the queue.
	update(t, s, func(tx store.Tx) error {
		if _, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_ready", Events: []invocation.Event{ev("inv_ready", invocation.EventStarted, "claim", "", now)}}); err != nil {
			return err
		}
		return tx.SetScheduling("acme", "inv_ready", store.Scheduling{LeaseOwner: "me", LeaseExpiresAt: ptr(now.Add(time.Hour))})
	})
	loads, err = s.TenantLoads(ctx, now)
	require.NoError(t, err)
	require.Equal(t, int64(0), loads[0].Ready)
	require.Equal(t, map[invocation.Status]int64{invocation.StatusQueued: 1, invocation.StatusRunning: 3, invocation.StatusSuspended: 1}, loads[0].InFlight)
}
