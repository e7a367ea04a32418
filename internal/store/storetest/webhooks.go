package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/webhook"
)

func newWebhook(tenant, id string) *webhook.Trigger {
	return &webhook.Trigger{ID: id, TenantID: tenant, Name: id, EntrypointID: "ep", Authentication: webhook.Authentication{Type: webhook.AuthBearer},
		AllowedSources: []string{}, MaxBodyBytes: 1024, ForwardHeaders: []string{}, ExecutionContext: "system", Status: webhook.StatusActive,
		SecretGeneration: 1, CreatedAt: t0, UpdatedAt: t0}
}

func testWebhooks(t *testing.T, s store.Store) {
	ctx := context.Background()
	update := func(fn func(store.Tx) error) error { return s.Update(ctx, fn) }

	// Triggers: insert, conflict per tenant, optimistic update, list, count, isolation.
	require.NoError(t, update(func(tx store.Tx) error {
		for _, w := range []*webhook.Trigger{newWebhook("a", "w1"), newWebhook("a", "w2"), newWebhook("b", "w1")} {
			if err := tx.InsertWebhookTrigger(w); err != nil {
				return err
			}
			require.EqualValues(t, 1, w.Revision)
		}
		return nil
	}))
	require.ErrorIs(t, update(func(tx store.Tx) error { return tx.InsertWebhookTrigger(newWebhook("a", "w1")) }), store.ErrConflict)
	w, err := s.WebhookTrigger(ctx, "a", "w1")
	require.NoError(t, err)
	stale := w
	w.Name, w.Status = "renamed", webhook.StatusDisabled
	require.NoError(t, update(func(tx store.Tx) error { return tx.UpdateWebhookTrigger(&w) }))
	require.EqualValues(t, 2, w.Revision)
	require.ErrorIs(t, update(func(tx store.Tx) error { return tx.UpdateWebhookTrigger(&stale) }), store.ErrStale)
	got, err := s.WebhookTrigger(ctx, "a", "w1")
	require.NoError(t, err)
	require.Equal(t, "renamed", got.Name)
	require.Equal(t, webhook.StatusDisabled, got.Status)
	_, err = s.WebhookTrigger(ctx, "c", "w1")
	require.ErrorIs(t, err, store.ErrNotFound)
	n, err := s.CountTenantWebhookTriggers(ctx, "a")
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	page, err := s.ListWebhookTriggers(ctx, "a", store.ListQuery{Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.True(t, page.HasMore)

	// Secrets: generations, expiry of the older ones kept, older ones dropped, the walk.
	until := t0.Add(time.Hour)
	require.NoError(t, update(func(tx store.Tx) error {
		if err := tx.PutWebhookSecret(webhook.Secret{TenantID: "a", TriggerID: "w1", Generation: 1, Sealed: []byte("s1"), CreatedAt: t0}, 1, nil); err != nil {
			return err
		}
		if err := tx.PutWebhookSecret(webhook.Secret{TenantID: "a", TriggerID: "w1", Generation: 2, Sealed: []byte("s2"), CreatedAt: t0}, 1, &until); err != nil {
			return err
		}
		return tx.PutWebhookSecret(webhook.Secret{TenantID: "b", TriggerID: "w1", Generation: 1, Sealed: []byte("b1"), CreatedAt: t0}, 1, nil)
	}))
	secs, err := s.WebhookSecrets(ctx, "a", "w1")
	require.NoError(t, err)
	require.Len(t, secs, 2)
	require.Equal(t, 2, secs[0].Generation)
	require.Nil(t, secs[0].ExpiresAt)
	require.Equal(t, until, *secs[1].ExpiresAt)
	require.NoError(t, update(func(tx store.Tx) error {
		return tx.PutWebhookSecret(webhook.Secret{TenantID: "a", TriggerID: "w1", Generation: 3, Sealed: []byte("s3"), CreatedAt: t0}, 3, nil)
	}))
	secs, err = s.WebhookSecrets(ctx, "a", "w1")
	require.NoError(t, err)
	require.Len(t, secs, 1)
	all, err := s.WebhookSecretsAfter(ctx, store.WebhookSecretKey{}, 10)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "a", all[0].TenantID)
	rest, err := s.WebhookSecretsAfter(ctx, store.WebhookSecretKey{TenantID: "a", TriggerID: "w1", Generation: 3}, 10)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, "b", rest[0].TenantID)
	moved := all[0]
	moved.Sealed = []byte("rewrapped")
	require.NoError(t, update(func(tx store.Tx) error { return tx.RewrapWebhookSecret(moved, []byte("s3")) }))
	require.ErrorIs(t, update(func(tx store.Tx) error { return tx.RewrapWebhookSecret(moved, []byte("s3")) }), store.ErrStale)

	// Deliveries: the newest `keep` stay.
	for i := 0; i < 5; i++ {
		d := webhook.Delivery{ID: fmt.Sprintf("d%d", i), TenantID: "a", TriggerID: "w1", ReceivedAt: t0.Add(time.Duration(i) * time.Second),
			StatusCode: 202, Outcome: webhook.OutcomeAccepted}
		require.NoError(t, update(func(tx store.Tx) error { return tx.RecordWebhookDelivery(d, 3) }))
	}
	dp, err := s.WebhookDeliveries(ctx, "a", "w1", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	var ids []string
	for _, d := range dp.Items {
		ids = append(ids, d.ID)
	}
	require.Equal(t, []string{"d4", "d3", "d2"}, ids)
	dp, err = s.WebhookDeliveries(ctx, "b", "w1", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, dp.Items)

	// Seen: remembered until it expires, then it may be remembered again.
	seen := webhook.Seen{TenantID: "a", TriggerID: "w1", Kind: webhook.KindSignature, Key: "k", InvocationID: "inv", DeliveryID: "d", ExpiresAt: t0.Add(time.Minute)}
	require.NoError(t, update(func(tx store.Tx) error { return tx.RememberWebhook(seen, t0) }))
	require.ErrorIs(t, update(func(tx store.Tx) error { return tx.RememberWebhook(seen, t0.Add(30*time.Second)) }), store.ErrConflict)
	found, err := s.WebhookSeenAt(ctx, "a", "w1", webhook.KindSignature, "k", t0)
	require.NoError(t, err)
	require.Equal(t, "inv", found.InvocationID)
	_, err = s.WebhookSeenAt(ctx, "a", "w1", webhook.KindSignature, "k", t0.Add(time.Minute))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.WebhookSeenAt(ctx, "b", "w1", webhook.KindSignature, "k", t0)
	require.ErrorIs(t, err, store.ErrNotFound)
	seen.ExpiresAt = t0.Add(2 * time.Hour)
	require.NoError(t, update(func(tx store.Tx) error { return tx.RememberWebhook(seen, t0.Add(time.Minute)) }))

	// Delete takes the secrets, deliveries and memory with it.
	require.NoError(t, update(func(tx store.Tx) error { return tx.DeleteWebhookTrigger("a", "w1") }))
	require.ErrorIs(t, update(func(tx store.Tx) error { return tx.DeleteWebhookTrigger("a", "w1") }), store.ErrNotFound)
	secs, err = s.WebhookSecrets(ctx, "a", "w1")
	require.NoError(t, err)
	require.Empty(t, secs)
	dp, err = s.WebhookDeliveries(ctx, "a", "w1", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, dp.Items)
	_, err = s.WebhookSeenAt(ctx, "a", "w1", webhook.KindSignature, "k", t0)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.WebhookTrigger(ctx, "b", "w1")
	require.NoError(t, err, "another tenant's trigger of the same id stays")
}
