package tokens

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tenant"
)

func newService(t *testing.T) (*Service, *clock.Fake, store.Store) {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return NewService(st, c, idgen.UUIDv7{}, "op-secret", tenant.ValidID), c, st
}

var op = auth.SecurityContext{SubjectID: OperatorSubject, Operator: true}

func TestIssueAuthenticateRevoke(t *testing.T) {
	s, c, st := newService(t)
	ctx := context.Background()
	sc, err := s.Authenticate(ctx, "op-secret")
	require.NoError(t, err)
	require.True(t, sc.Operator)

	exp := c.Now().Add(time.Hour)
	tk, err := s.CreateToken(ctx, op, CreateTokenRequest{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleDeveloper}, ExpiresAt: &exp})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(tk.Secret, auth.SecretPrefix))
	sc, err = s.Authenticate(ctx, tk.Secret)
	require.NoError(t, err)
	require.Equal(t, auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleDeveloper}, TokenID: tk.ID}, sc)
	require.True(t, sc.Has(auth.RoleOperator))
	require.False(t, sc.Has(auth.RoleAdmin))

	stored, err := st.TokenByHash(ctx, auth.Hash(tk.Secret))
	require.NoError(t, err)
	require.NotContains(t, stored.Hash, tk.Secret, "only a hash is stored")

	c.Advance(2 * time.Hour)
	_, err = s.Authenticate(ctx, tk.Secret)
	require.Equal(t, 401, problem.From(err).Status, "expired")

	tk2, err := s.CreateToken(ctx, op, CreateTokenRequest{TenantID: "acme", SubjectID: "bob", Roles: []auth.Role{auth.RoleViewer}})
	require.NoError(t, err)
	require.NoError(t, s.RevokeToken(ctx, op, tk2.ID))
	_, err = s.Authenticate(ctx, tk2.Secret)
	require.Equal(t, 401, problem.From(err).Status, "revoked")
	for _, secret := range []string{"", "lark_nope", "op-secret "} {
		_, err = s.Authenticate(ctx, secret)
		require.Equal(t, 401, problem.From(err).Status, "%q", secret)
	}
}

func TestTenantAdminsStayInTheirTenant(t *testing.T) {
	s, _, _ := newService(t)
	ctx := context.Background()
	admin := auth.SecurityContext{TenantID: "acme", SubjectID: "root", Roles: []auth.Role{auth.RoleAdmin}}
	tk, err := s.CreateToken(ctx, admin, CreateTokenRequest{SubjectID: "carol", Roles: []auth.Role{auth.RoleViewer}})
	require.NoError(t, err)
	require.Equal(t, "acme", tk.TenantID, "tenant_id defaults to the admin's tenant")
	_, err = s.CreateToken(ctx, admin, CreateTokenRequest{TenantID: "other", SubjectID: "x", Roles: []auth.Role{auth.RoleViewer}})
	require.Equal(t, 403, problem.From(err).Status)
	other, err := s.CreateToken(ctx, op, CreateTokenRequest{TenantID: "other", SubjectID: "x", Roles: []auth.Role{auth.RoleViewer}})
	require.NoError(t, err)
	require.Equal(t, 404, problem.From(s.RevokeToken(ctx, admin, other.ID)).Status, "another tenant's token is not found")
	page, err := s.ListTokens(ctx, admin, store.ListQuery{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	all, err := s.ListTokens(ctx, op, store.ListQuery{})
	require.NoError(t, err)
	require.Len(t, all.Items, 2)
}

func TestCreateTokenValidation(t *testing.T) {
	s, c, _ := newService(t)
	past := c.Now().Add(-time.Second)
	_, err := s.CreateToken(context.Background(), op, CreateTokenRequest{TenantID: "Bad!", Roles: []auth.Role{"root"}, ExpiresAt: &past})
	pe := problem.From(err)
	require.Equal(t, 422, pe.Status)
	var paths []string
	for _, i := range pe.Issues {
		paths = append(paths, i.Path)
	}
	require.ElementsMatch(t, []string{"$.tenant_id", "$.subject_id", "$.roles[0]", "$.expires_at"}, paths, "every problem at once")
}

// TestAuthCacheIsBounded: a revocation through the service is immediate; one made elsewhere (another
// process sharing the database) is seen within AuthCacheTTL.
func TestAuthCacheIsBounded(t *testing.T) {
	s, c, st := newService(t)
	ctx := context.Background()
	a, err := s.CreateToken(ctx, op, CreateTokenRequest{TenantID: "acme", SubjectID: "a", Roles: []auth.Role{auth.RoleViewer}})
	require.NoError(t, err)
	b, err := s.CreateToken(ctx, op, CreateTokenRequest{TenantID: "acme", SubjectID: "b", Roles: []auth.Role{auth.RoleViewer}})
	require.NoError(t, err)
	for _, tk := range []CreatedToken{a, b} {
		_, err := s.Authenticate(ctx, tk.Secret)
		require.NoError(t, err)
	}
	require.NoError(t, s.RevokeToken(ctx, op, a.ID))
	_, err = s.Authenticate(ctx, a.Secret)
	require.Equal(t, 401, problem.From(err).Status, "revoked here: immediate")

	require.NoError(t, st.Update(ctx, func(tx store.Tx) error { return tx.RevokeToken("acme", b.ID, c.Now()) }))
	_, err = s.Authenticate(ctx, b.Secret)
	require.NoError(t, err, "revoked elsewhere: still cached within the TTL")
	c.Advance(AuthCacheTTL)
	_, err = s.Authenticate(ctx, b.Secret)
	require.Equal(t, 401, problem.From(err).Status, "and refused once the TTL has passed")
}
