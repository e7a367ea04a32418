package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

func newIdentityProvider(id, tenantID, issuer string) identity.Provider {
	p := identity.Provider{ID: id, TenantID: tenantID, Issuer: issuer, Audiences: []string{"lark"},
		Claims:      identity.Claims{Tenant: "tenant", Roles: "groups"},
		RoleMapping: map[string]auth.Role{"devs": auth.RoleDeveloper}, CreatedAt: t0, CreatedBy: "operator"}
	p.Normalize()
	return p
}

// testIdentityProviders pins the identity provider store: one provider per issuer, the whole
// document round-trips, tenant scoping of reads and deletes, and lists.
func testIdentityProviders(t *testing.T, s store.Store) {
	ctx := context.Background()
	plat := newIdentityProvider("idp_1", "", "https://sso.example.com/realms/lark")
	plat.OperatorGroups = []string{"platform-ops"}
	acme := newIdentityProvider("idp_2", "acme", "https://login.acme.example")
	update(t, s, func(tx store.Tx) error { return tx.InsertIdentityProvider(plat) })
	update(t, s, func(tx store.Tx) error { return tx.InsertIdentityProvider(acme) })
	dup := newIdentityProvider("idp_3", "globex", acme.Issuer)
	require.ErrorIs(t, s.Update(ctx, func(tx store.Tx) error { return tx.InsertIdentityProvider(dup) }), store.ErrConflict)

	got, err := s.IdentityProviderByIssuer(ctx, plat.Issuer)
	require.NoError(t, err)
	require.Equal(t, plat, got)
	_, err = s.IdentityProviderByIssuer(ctx, "https://unknown.example")
	require.ErrorIs(t, err, store.ErrNotFound)

	got, err = s.IdentityProvider(ctx, "acme", "idp_2")
	require.NoError(t, err)
	require.Equal(t, acme, got)
	_, err = s.IdentityProvider(ctx, "globex", "idp_2")
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant's issuer is not found")
	_, err = s.IdentityProvider(ctx, "", "idp_2")
	require.NoError(t, err, "the operator reads every issuer")

	all, err := s.ListIdentityProviders(ctx, "", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, all.Items, 2)
	own, err := s.ListIdentityProviders(ctx, "acme", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []identity.Provider{acme}, own.Items)
	f, err := odata.ParseFilter("issuer eq 'https://sso.example.com/realms/lark'")
	require.NoError(t, err)
	byIssuer, err := s.ListIdentityProviders(ctx, "", store.ListQuery{Limit: 10, Filter: f})
	require.NoError(t, err)
	require.Equal(t, []identity.Provider{plat}, byIssuer.Items)

	err = s.Update(ctx, func(tx store.Tx) error { _, err := tx.DeleteIdentityProvider("globex", "idp_2"); return err })
	require.ErrorIs(t, err, store.ErrNotFound)
	var deleted identity.Provider
	update(t, s, func(tx store.Tx) (err error) { deleted, err = tx.DeleteIdentityProvider("acme", "idp_2"); return err })
	require.Equal(t, acme.Issuer, deleted.Issuer)
	_, err = s.IdentityProviderByIssuer(ctx, acme.Issuer)
	require.ErrorIs(t, err, store.ErrNotFound)
	// Its issuer may be registered again.
	update(t, s, func(tx store.Tx) error { return tx.InsertIdentityProvider(dup) })
}
