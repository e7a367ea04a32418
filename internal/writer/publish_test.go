package writer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/storetest"
)

// TestEmittedWriteRepeatedPublishesOnce: the outbox's "never twice". A write of event_emitted
// entries that is repeated (a writer that retries after a crash between commit and anything else)
// appends nothing and publishes nothing; another entry carrying an event id already published (the
// same emit recorded again) leaves one row; a write that rolls back publishes nothing.
func TestEmittedWriteRepeatedPublishesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, c, s := newWriter(t, nil)
	rec := newRecord("inv-1", invocation.ModeAsync, c.Now())
	created, err := storetest.CreatedEvent(rec)
	require.NoError(t, err)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.StartInvocation([]invocation.Event{created}, store.Scheduling{})
		return err
	}))
	const typ = "gts.x.core.events.event.v1~vendor.app.orders.shipped.v1~"
	emits := func(payload string) []invocation.Event {
		evs, err := invocation.EmittedEvents(rec, "journal-0", c.Now(), []invocation.Emitted{{EventTypeID: typ, Payload: json.RawMessage(payload)}})
		require.NoError(t, err)
		return evs
	}
	write := func(evs []invocation.Event, fail error) ([]invocation.Event, error) {
		var appended []invocation.Event
		err := s.Update(ctx, func(tx store.Tx) error {
			var err error
			if _, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: rec.ID, Events: evs}); err != nil {
				return err
			}
			return fail
		})
		return appended, err
	}
	rows := func() []string {
		page, err := st.ListEvents(ctx, "acme", store.ListQuery{Limit: 100})
		require.NoError(t, err)
		var ids []string
		for _, e := range page.Items {
			ids = append(ids, e.ID)
		}
		return ids
	}

	// A write that rolls back publishes nothing.
	_, err = write(emits(`{"n":1}`), context.Canceled)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, rows())

	appended, err := write(emits(`{"n":1}`), nil)
	require.NoError(t, err)
	require.Len(t, appended, 1)
	require.Equal(t, []string{"inv-1.a1.journal-0.e0"}, rows())
	got, err := st.Event(ctx, "acme", "inv-1.a1.journal-0.e0")
	require.NoError(t, err)
	require.Equal(t, "lark://invocations/inv-1", got.Source)
	require.Equal(t, "bob", got.PublishedBy)
	require.Equal(t, "corr-inv-1", got.CorrelationID)

	// The same write again: its idempotency key is logged, nothing is appended or published.
	appended, err = write(emits(`{"n":1}`), nil)
	require.NoError(t, err)
	require.Empty(t, appended)
	require.Len(t, rows(), 1)

	// The same emit under another log key (recorded again): the events table keeps the first.
	again := emits(`{"n":2}`)
	again[0].IdempotencyKey = "another-key"
	appended, err = write(again, nil)
	require.NoError(t, err)
	require.Len(t, appended, 1)
	require.Len(t, rows(), 1)
	got, err = st.Event(ctx, "acme", "inv-1.a1.journal-0.e0")
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(got.Payload))
}
