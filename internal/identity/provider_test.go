package identity_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/identity"
)

func TestNormalizeDefaults(t *testing.T) {
	t.Parallel()
	p := identity.Provider{Issuer: " https://sso.example.com ", Audiences: []string{"lark"}, Claims: identity.Claims{Tenant: "t"}}
	p.Normalize()
	require.Equal(t, "https://sso.example.com", p.Issuer)
	require.Equal(t, []string{"RS256", "ES256"}, p.Algorithms)
	require.Equal(t, int64(identity.DefaultClockSkew), p.ClockSkewSeconds)
	require.Equal(t, "sub", p.Claims.Subject)
	require.Empty(t, p.Validate())
	require.Equal(t, "platform", p.Scope())
}

func TestValidIssuer(t *testing.T) {
	t.Parallel()
	for issuer, ok := range map[string]bool{
		"https://sso.example.com/realms/x": true, "http://sso.example.com": false, "": false,
		"https://sso.example.com/?a=b": false, "https://u:p@sso.example.com": false, "https://": false, "not a url": false,
	} {
		require.Equal(t, ok, identity.ValidIssuer(issuer) == "", issuer)
	}
}

func TestGrant(t *testing.T) {
	t.Parallel()
	plat := identity.Provider{Claims: identity.Claims{Subject: "sub", Tenant: "tenant", Roles: "groups"},
		RoleMapping:    map[string]auth.Role{"a": auth.RoleAdmin, "v": auth.RoleViewer},
		OperatorGroups: []string{"ops"}}
	sc, err := plat.Grant("alice", "acme", []string{"a", "v", "a"})
	require.NoError(t, err)
	require.Equal(t, auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleViewer, auth.RoleAdmin}}, sc)
	sc, err = plat.Grant("root", "", []string{"ops"})
	require.NoError(t, err)
	require.True(t, sc.Operator)
	_, err = plat.Grant("", "acme", []string{"a"})
	require.ErrorContains(t, err, `"sub"`)
	_, err = plat.Grant("alice", "", []string{"a"})
	require.ErrorContains(t, err, `"tenant"`)
	_, err = plat.Grant("alice", "acme", nil)
	require.ErrorContains(t, err, "maps to a role")

	owned := plat
	owned.TenantID = "acme"
	sc, err = owned.Grant("bob", "", []string{"ops", "v"})
	require.NoError(t, err)
	require.False(t, sc.Operator, "a tenant-owned issuer never makes an operator")
	require.Equal(t, "acme", sc.TenantID)
	_, err = owned.Grant("bob", "globex", []string{"v"})
	require.ErrorContains(t, err, "another tenant")
}

// TestFollowsTenantPolicy: only a tenant-owned provider a tenant admin registered, or one stored
// before RegisteredBy existed (read as a tenant admin's), follows the tenant's policy flag.
func TestFollowsTenantPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tenant string
		by     identity.Registrar
		want   bool
	}{
		{"", identity.RegisteredByOperator, false},
		{"", "", false},
		{"acme", identity.RegisteredByOperator, false},
		{"acme", identity.RegisteredByTenantAdmin, true},
		{"acme", "", true},
		{"acme", "someone_else", true},
	} {
		p := identity.Provider{TenantID: c.tenant, RegisteredBy: c.by}
		require.Equal(t, c.want, p.FollowsTenantPolicy(), "tenant %q, registered by %q", c.tenant, c.by)
	}
}
