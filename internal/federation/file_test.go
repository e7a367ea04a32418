package federation_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/federation"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

func newService(t *testing.T) (*federation.Service, *sqlstore.Store) {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "lark.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return federation.NewService(st, clock.Real{}, idgen.UUIDv7{}, nil), st
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "idp.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

const oneIssuer = `{"identity_providers": [{"issuer": "https://sso.example.com/realms/lark", "audiences": ["lark"],
  "claims": {"tenant": "tenant", "roles": "groups"}, "role_mapping": {"devs": "%s"}}]}`

// TestLoadFile: the file adds its issuers, replaces a changed one in place, leaves an unchanged one
// alone (no new audit event), and refuses an invalid entry by its JSON path.
func TestLoadFile(t *testing.T) {
	t.Parallel()
	svc, st := newService(t)
	ctx := context.Background()
	require.NoError(t, svc.LoadFile(ctx, writeFile(t, fmt.Sprintf(oneIssuer, "developer"))))
	p, err := st.IdentityProviderByIssuer(ctx, "https://sso.example.com/realms/lark")
	require.NoError(t, err)
	require.Equal(t, auth.RoleDeveloper, p.RoleMapping["devs"])
	require.Equal(t, federation.ConfigSubject, p.CreatedBy)

	require.NoError(t, svc.LoadFile(ctx, writeFile(t, fmt.Sprintf(oneIssuer, "developer"))))
	require.NoError(t, svc.LoadFile(ctx, writeFile(t, fmt.Sprintf(oneIssuer, "admin"))))
	q, err := st.IdentityProviderByIssuer(ctx, p.Issuer)
	require.NoError(t, err)
	require.Equal(t, p.ID, q.ID, "a changed provider keeps its id")
	require.Equal(t, auth.RoleAdmin, q.RoleMapping["devs"])
	page, err := st.ListAudit(ctx, "platform", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "created, then changed; the unchanged load records nothing")

	err = svc.LoadFile(ctx, writeFile(t, `{"identity_providers": [{"issuer": "http://x", "audiences": ["a"], "claims": {"tenant": "t"}}]}`))
	require.ErrorContains(t, err, "$.identity_providers[0].issuer")
	err = svc.LoadFile(ctx, writeFile(t, `{"providers": []}`))
	require.ErrorContains(t, err, "unknown field")
}

// TestLoadFileRegistersAsOperator: the file's providers, a tenant-owned one too, are the platform
// operator's; one stored before RegisteredBy existed is replaced once (keeping its id) and marked
// the operator's, then left alone.
func TestLoadFileRegistersAsOperator(t *testing.T) {
	t.Parallel()
	svc, st := newService(t)
	ctx := context.Background()
	const tenantIssuer = `{"identity_providers": [{"tenant_id": "acme", "issuer": "https://sso.acme.example/realms/lark",
  "audiences": ["lark"], "claims": {"roles": "groups"}, "role_mapping": {"devs": "developer"}}]}`
	require.NoError(t, svc.LoadFile(ctx, writeFile(t, tenantIssuer)))
	p, err := st.IdentityProviderByIssuer(ctx, "https://sso.acme.example/realms/lark")
	require.NoError(t, err)
	require.Equal(t, identity.RegisteredByOperator, p.RegisteredBy)
	require.False(t, p.FollowsTenantPolicy())

	// As if stored before RegisteredBy existed.
	legacy := p
	legacy.RegisteredBy = ""
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.DeleteIdentityProvider("", p.ID); err != nil {
			return err
		}
		return tx.InsertIdentityProvider(legacy)
	}))
	require.NoError(t, svc.LoadFile(ctx, writeFile(t, tenantIssuer)))
	q, err := st.IdentityProviderByIssuer(ctx, p.Issuer)
	require.NoError(t, err)
	require.Equal(t, p.ID, q.ID)
	require.Equal(t, identity.RegisteredByOperator, q.RegisteredBy)
	require.NoError(t, svc.LoadFile(ctx, writeFile(t, tenantIssuer)))
	page, err := st.ListAudit(ctx, "acme", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "created, then marked the operator's; the third load records nothing")
}
