package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

func newSecret(tenantID, name string, at time.Time) (store.Secret, store.SecretVersion) {
	s := store.Secret{TenantID: tenantID, Name: name, Description: "d", AllowedHosts: []string{"api.example.com"}, Version: 1,
		CreatedAt: at, UpdatedAt: at, CreatedBy: "alice", UpdatedBy: "alice"}
	v := store.SecretVersion{TenantID: tenantID, Name: name, Version: 1, CreatedAt: at, CreatedBy: "alice", KeyID: "k1",
		Sealed: []byte("sealed-" + tenantID + "-" + name + "-1")}
	return s, v
}

// testSecrets pins the secret store: metadata, versions (the latest keeps its sealed value, older
// ones are erased, at most keep are kept), tenant isolation, lists, use stamps and the rotation
// queries.
func testSecrets(t *testing.T, s store.Store) {
	ctx := context.Background()
	sec, v := newSecret("acme", "stripe_key", t0)
	update(t, s, func(tx store.Tx) error { return tx.InsertSecret(sec, v) })
	err := s.Update(ctx, func(tx store.Tx) error { return tx.InsertSecret(sec, v) })
	require.ErrorIs(t, err, store.ErrConflict)
	// The same name in another tenant is another secret.
	g, gv := newSecret("globex", "stripe_key", t0)
	update(t, s, func(tx store.Tx) error { return tx.InsertSecret(g, gv) })

	got, err := s.Secret(ctx, "acme", "stripe_key")
	require.NoError(t, err)
	require.Equal(t, []string{"api.example.com"}, got.AllowedHosts)
	require.Equal(t, t0, got.CreatedAt)
	require.Nil(t, got.LastUsedAt)
	require.Len(t, got.Versions, 1)
	require.Nil(t, got.Versions[0].Sealed, "metadata reads carry no sealed value")
	_, err = s.Secret(ctx, "initech", "stripe_key")
	require.ErrorIs(t, err, store.ErrNotFound)

	sealed, err := s.SealedSecret(ctx, "acme", "stripe_key")
	require.NoError(t, err)
	require.Equal(t, v.Sealed, sealed.Version.Sealed)
	require.Equal(t, "k1", sealed.Version.KeyID)
	_, err = s.SealedSecret(ctx, "initech", "stripe_key")
	require.ErrorIs(t, err, store.ErrNotFound)

	// New versions: the older values are erased, at most keep versions remain.
	for i := int64(2); i <= 5; i++ {
		nv := store.SecretVersion{TenantID: "acme", Name: "stripe_key", Version: i, CreatedAt: t0.Add(time.Duration(i) * time.Minute),
			CreatedBy: "bob", KeyID: "k1", Sealed: []byte(fmt.Sprintf("sealed-%d", i))}
		update(t, s, func(tx store.Tx) error {
			if err := tx.AddSecretVersion(nv, 3); err != nil {
				return err
			}
			cur, err := tx.Secret("acme", "stripe_key")
			if err != nil {
				return err
			}
			cur.Version, cur.UpdatedAt, cur.UpdatedBy = nv.Version, nv.CreatedAt, "bob"
			return tx.UpdateSecret(cur)
		})
	}
	got, err = s.Secret(ctx, "acme", "stripe_key")
	require.NoError(t, err)
	require.EqualValues(t, 5, got.Version)
	require.Equal(t, "bob", got.UpdatedBy)
	require.Len(t, got.Versions, 3)
	require.EqualValues(t, []int64{5, 4, 3}, []int64{got.Versions[0].Version, got.Versions[1].Version, got.Versions[2].Version})
	require.Equal(t, "", got.Versions[1].KeyID, "a superseded version is erased")
	sealed, err = s.SealedSecret(ctx, "acme", "stripe_key")
	require.NoError(t, err)
	require.Equal(t, []byte("sealed-5"), sealed.Version.Sealed)

	// Rotation: only current values not under the given key, in key order, after the cursor.
	toRewrap, err := s.SecretsToRewrap(ctx, store.RewrapQuery{ExceptKeyID: "k2", Limit: 10})
	require.NoError(t, err)
	require.Len(t, toRewrap, 2, "acme's latest and globex's")
	require.Equal(t, "acme", toRewrap[0].TenantID)
	require.Equal(t, []byte("sealed-5"), toRewrap[0].Sealed)
	next, err := s.SecretsToRewrap(ctx, store.RewrapQuery{ExceptKeyID: "k2", Limit: 10,
		After: store.SecretRef{TenantID: "acme", Name: "stripe_key", Version: 5}})
	require.NoError(t, err)
	require.Len(t, next, 1)
	require.Equal(t, "globex", next[0].TenantID)
	var ok bool
	update(t, s, func(tx store.Tx) (err error) {
		ok, err = tx.RewrapSecret(store.SecretRewrap{Ref: store.SecretRef{TenantID: "acme", Name: "stripe_key", Version: 5},
			FromKeyID: "k1", KeyID: "k2", Sealed: []byte("rewrapped")})
		return err
	})
	require.True(t, ok)
	update(t, s, func(tx store.Tx) (err error) {
		// Already rewrapped (or changed since it was read): left alone.
		ok, err = tx.RewrapSecret(store.SecretRewrap{Ref: store.SecretRef{TenantID: "acme", Name: "stripe_key", Version: 5},
			FromKeyID: "k1", KeyID: "k2", Sealed: []byte("again")})
		return err
	})
	require.False(t, ok)
	sealed, err = s.SealedSecret(ctx, "acme", "stripe_key")
	require.NoError(t, err)
	require.Equal(t, []byte("rewrapped"), sealed.Version.Sealed)
	require.Equal(t, "k2", sealed.Version.KeyID)
	toRewrap, err = s.SecretsToRewrap(ctx, store.RewrapQuery{ExceptKeyID: "k2", Limit: 10})
	require.NoError(t, err)
	require.Len(t, toRewrap, 1)

	// Use stamps.
	used := t0.Add(time.Hour)
	update(t, s, func(tx store.Tx) error { return tx.TouchSecret("acme", "stripe_key", used) })
	update(t, s, func(tx store.Tx) error { return tx.TouchSecret("acme", "gone", used) })
	got, err = s.Secret(ctx, "acme", "stripe_key")
	require.NoError(t, err)
	require.NotNil(t, got.LastUsedAt)
	require.Equal(t, used, *got.LastUsedAt)

	// Lists: scoped, ordered by name by default, filterable, paged.
	for i, n := range []string{"b_key", "a_key", "c_key"} {
		s2, v2 := newSecret("acme", n, t0.Add(time.Duration(i+1)*time.Second))
		update(t, s, func(tx store.Tx) error { return tx.InsertSecret(s2, v2) })
	}
	var n int64
	update(t, s, func(tx store.Tx) (err error) { n, err = tx.CountTenantSecrets("acme"); return err })
	require.EqualValues(t, 4, n)
	page, err := s.ListSecrets(ctx, "acme", store.ListQuery{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"a_key", "b_key"}, secretNames(page.Items))
	require.True(t, page.HasMore)
	page, err = s.ListSecrets(ctx, "acme", store.ListQuery{Limit: 2, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{"c_key", "stripe_key"}, secretNames(page.Items))
	f, err := odata.ParseFilter("startswith(name, 'c_')")
	require.NoError(t, err)
	page, err = s.ListSecrets(ctx, "acme", store.ListQuery{Filter: f})
	require.NoError(t, err)
	require.Equal(t, []string{"c_key"}, secretNames(page.Items))
	page, err = s.ListSecrets(ctx, "acme", store.ListQuery{OrderBy: []odata.OrderItem{{Field: "created_at", Desc: true}}})
	require.NoError(t, err)
	require.Equal(t, []string{"c_key", "a_key", "b_key", "stripe_key"}, secretNames(page.Items))
	page, err = s.ListSecrets(ctx, "globex", store.ListQuery{})
	require.NoError(t, err)
	require.Equal(t, []string{"stripe_key"}, secretNames(page.Items))

	// Delete: the secret and its versions; another tenant's stays.
	update(t, s, func(tx store.Tx) error { return tx.DeleteSecret("acme", "stripe_key") })
	err = s.Update(ctx, func(tx store.Tx) error { return tx.DeleteSecret("acme", "stripe_key") })
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.SealedSecret(ctx, "acme", "stripe_key")
	require.ErrorIs(t, err, store.ErrNotFound)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateSecret(sec) })
	require.ErrorIs(t, err, store.ErrNotFound)
	// Recreated under the same name, it starts again at version 1 (the old versions are gone).
	update(t, s, func(tx store.Tx) error { return tx.InsertSecret(sec, v) })
	got, err = s.Secret(ctx, "acme", "stripe_key")
	require.NoError(t, err)
	require.Len(t, got.Versions, 1)
	_, err = s.SealedSecret(ctx, "globex", "stripe_key")
	require.NoError(t, err)
}

func secretNames(items []store.Secret) []string {
	out := []string{}
	for _, s := range items {
		out = append(out, s.Name)
	}
	return out
}
