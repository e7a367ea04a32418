package secrets_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/secrets"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

var admin = auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleAdmin}}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "lark.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

func newKey(t *testing.T) string {
	t.Helper()
	k, err := keyring.Generate()
	require.NoError(t, err)
	return k
}

func parse(t *testing.T, setting string) *keyring.Keyring {
	t.Helper()
	kr, err := keyring.Parse(setting)
	require.NoError(t, err)
	return kr
}

func ptr[T any](v T) *T { return &v }

func create(t *testing.T, svc *secrets.Service, sc auth.SecurityContext, name, value string, hosts ...string) {
	t.Helper()
	_, err := svc.Create(context.Background(), sc, secrets.Create{Name: name, Value: ptr(value), AllowedHosts: hosts})
	require.NoError(t, err)
}

func resolve(t *testing.T, svc *secrets.Service, tenantID, name string) (egress.Secret, error) {
	t.Helper()
	return svc.ForTenant(tenantID, "inv_1").ResolveSecret(context.Background(), name)
}

func TestResolveIsTenantScoped(t *testing.T) {
	st := openStore(t)
	svc := secrets.New(st, secrets.Options{Keyring: parse(t, newKey(t))})
	create(t, svc, admin, "api_key", "value-of-acme", "api.example.com")

	got, err := resolve(t, svc, "acme", "api_key")
	require.NoError(t, err)
	require.Equal(t, "value-of-acme", got.Value)
	require.Equal(t, []string{"api.example.com"}, got.AllowedHosts)

	_, err = resolve(t, svc, "globex", "api_key")
	require.ErrorIs(t, err, egress.ErrUnknownSecret, "another tenant's secret does not exist for it")
	_, err = resolve(t, svc, "acme", "nope")
	require.ErrorIs(t, err, egress.ErrUnknownSecret)
	_, err = resolve(t, svc, "acme", "bad name!")
	require.ErrorIs(t, err, egress.ErrUnknownSecret)

	// A new value is used at once.
	_, err = svc.Update(context.Background(), admin, "api_key", secrets.Update{Value: ptr("second-value")})
	require.NoError(t, err)
	got, err = resolve(t, svc, "acme", "api_key")
	require.NoError(t, err)
	require.Equal(t, "second-value", got.Value)

	// Without a master key nothing resolves, and the use cases answer 503.
	off := secrets.New(st, secrets.Options{})
	_, err = resolve(t, off, "acme", "api_key")
	require.ErrorIs(t, err, egress.ErrSecretsUnavailable)
	_, err = off.Get(context.Background(), admin, "api_key")
	require.Equal(t, 503, problem.From(err).Status)
}

func TestSealedValueIsBoundToItsRow(t *testing.T) {
	// A value sealed for one (tenant, name, version) does not open as another: the store row of
	// globex's secret is given acme's ciphertext, and resolving it fails without the value.
	st := openStore(t)
	kr := parse(t, newKey(t))
	svc := secrets.New(st, secrets.Options{Keyring: kr})
	create(t, svc, admin, "api_key", "value-of-acme", "api.example.com")
	create(t, svc, auth.SecurityContext{TenantID: "globex", SubjectID: "g", Roles: []auth.Role{auth.RoleAdmin}}, "api_key", "value-of-globex", "api.example.com")
	acme, err := st.SealedSecret(context.Background(), "acme", "api_key")
	require.NoError(t, err)
	require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.RewrapSecret(store.SecretRewrap{Ref: store.SecretRef{TenantID: "globex", Name: "api_key", Version: 1},
			FromKeyID: kr.Current(), KeyID: kr.Current(), Sealed: acme.Version.Sealed})
		return err
	}))
	_, err = resolve(t, svc, "globex", "api_key")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "value-of")
	require.False(t, errors.Is(err, egress.ErrUnknownSecret))
}

func TestLastUsedIsThrottled(t *testing.T) {
	st := openStore(t)
	clk := clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	svc := secrets.New(st, secrets.Options{Keyring: parse(t, newKey(t)), Clock: clk})
	create(t, svc, admin, "api_key", "value-1234", "api.example.com")
	accessed := func() int {
		f, err := odata.ParseFilter("type eq '" + secrets.AuditAccessed + "'")
		require.NoError(t, err)
		p, err := st.ListAudit(context.Background(), "acme", store.ListQuery{Filter: f, Limit: 100})
		require.NoError(t, err)
		return len(p.Items)
	}
	for i := 0; i < 5; i++ {
		_, err := resolve(t, svc, "acme", "api_key")
		require.NoError(t, err)
	}
	s, err := svc.Get(context.Background(), admin, "api_key")
	require.NoError(t, err)
	require.NotNil(t, s.LastUsedAt)
	require.Equal(t, clk.Now(), *s.LastUsedAt)
	require.Equal(t, 1, accessed(), "one write per minute, not one per use")

	clk.Advance(secrets.DefaultTouchEvery)
	_, err = resolve(t, svc, "acme", "api_key")
	require.NoError(t, err)
	s, err = svc.Get(context.Background(), admin, "api_key")
	require.NoError(t, err)
	require.Equal(t, clk.Now(), *s.LastUsedAt)
	require.Equal(t, 2, accessed())
}

func TestRotation(t *testing.T) {
	st := openStore(t)
	oldKey, newK := newKey(t), newKey(t)
	old := secrets.New(st, secrets.Options{Keyring: parse(t, oldKey), RewrapBatch: 3})
	values := map[string]string{}
	for _, n := range []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7"} {
		values[n] = "value-of-" + n
		create(t, old, admin, n, values[n], "api.example.com")
	}
	// One secret has a second version: only the current value is rewrapped (the first is erased).
	_, err := old.Update(context.Background(), admin, "a1", secrets.Update{Value: ptr("value-of-a1-v2")})
	require.NoError(t, err)
	values["a1"] = "value-of-a1-v2"

	// With only the new key, nothing opens (and nothing is changed).
	only := secrets.New(st, secrets.Options{Keyring: parse(t, newK), RewrapBatch: 3})
	stats, err := only.Rewrap(context.Background())
	require.NoError(t, err)
	require.Equal(t, secrets.RewrapStats{Unknown: 7}, stats)
	_, err = resolve(t, only, "acme", "a2")
	require.Error(t, err)

	// "NEW,OLD": every value is rewrapped, in batches of 3 (a second pass finds nothing).
	both := secrets.New(st, secrets.Options{Keyring: parse(t, newK+","+oldKey), RewrapBatch: 3})
	stats, err = both.Rewrap(context.Background())
	require.NoError(t, err)
	require.Equal(t, secrets.RewrapStats{Rewrapped: 7}, stats)
	stats, err = both.Rewrap(context.Background())
	require.NoError(t, err)
	require.Equal(t, secrets.RewrapStats{}, stats)

	// Then OLD can be dropped: every value opens under NEW alone.
	for n, v := range values {
		got, err := resolve(t, only, "acme", n)
		require.NoError(t, err, n)
		require.Equal(t, v, got.Value)
	}
	left, err := st.SecretsToRewrap(context.Background(), store.RewrapQuery{ExceptKeyID: parse(t, newK).Current(), Limit: 100})
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestRoles(t *testing.T) {
	st := openStore(t)
	svc := secrets.New(st, secrets.Options{Keyring: parse(t, newKey(t))})
	dev := auth.SecurityContext{TenantID: "acme", SubjectID: "d", Roles: []auth.Role{auth.RoleDeveloper}}
	op := auth.SecurityContext{SubjectID: "operator", Operator: true}
	_, err := svc.Create(context.Background(), dev, secrets.Create{Name: "k", Value: ptr("value-1234"), AllowedHosts: []string{"a.example.com"}})
	require.Equal(t, 403, problem.From(err).Status)
	_, err = svc.List(context.Background(), op, store.ListQuery{})
	require.Equal(t, 403, problem.From(err).Status)
	create(t, svc, admin, "k", "value-1234", "a.example.com")
	_, err = svc.Get(context.Background(), dev, "k")
	require.NoError(t, err)
	require.Equal(t, 403, problem.From(svc.Delete(context.Background(), dev, "k")).Status)
}
