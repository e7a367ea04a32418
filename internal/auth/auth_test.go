package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRoleLadder(t *testing.T) {
	for i, r := range Roles {
		require.Equal(t, i+1, r.Rank())
		sc := SecurityContext{Roles: []Role{r}}
		for j, other := range Roles {
			require.Equal(t, j <= i, sc.Has(other), "%s has %s", r, other)
		}
	}
	require.False(t, Role("root").Valid())
	require.False(t, SecurityContext{Roles: []Role{"root"}}.Has(RoleViewer), "unknown roles grant nothing")
	require.True(t, SecurityContext{Operator: true}.Has(RoleAdmin))
	require.True(t, SecurityContext{Roles: []Role{RoleViewer, RoleDeveloper}}.Has(RoleOperator), "the highest role counts")
}

func TestSecrets(t *testing.T) {
	a, ha, err := NewSecret()
	require.NoError(t, err)
	b, hb, err := NewSecret()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, SecretPrefix))
	require.Equal(t, Hash(a), ha)
	require.NotEqual(t, ha, hb)
	require.Len(t, ha, 64)
	require.True(t, Equal(a, a))
	require.False(t, Equal(a, b))
}

func TestTokenActive(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	require.True(t, Token{}.Active(now))
	require.True(t, Token{ExpiresAt: &later}.Active(now))
	require.False(t, Token{ExpiresAt: &later}.Active(later), "expiry is exclusive")
	require.False(t, Token{RevokedAt: &now}.Active(now))
}

func TestContext(t *testing.T) {
	_, ok := FromContext(context.Background())
	require.False(t, ok)
	sc := SecurityContext{TenantID: "acme", SubjectID: "u"}
	got, ok := FromContext(WithContext(context.Background(), sc))
	require.True(t, ok)
	require.Equal(t, sc, got)
}
