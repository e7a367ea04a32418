package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/eventbus"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

const typeID = "gts.x.core.events.type.v1~vendor.app.orders.placed.v1~"

var (
	bob = auth.SecurityContext{TenantID: "acme", SubjectID: "bob", Roles: []auth.Role{auth.RoleOperator}}
	t0  = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
)

// counting is a Waits and a Subscriber that counts the events it is handed (fail: it fails).
type counting struct {
	waits, matches int
	fail           bool
	prepared       []any // what Match was handed, in order
}

// Prepare returns a value naming the event, which Match records.
func (c *counting) Prepare(ev events.Event) any { return "prepared " + ev.ID }

func (c *counting) DeliverToWaits(store.Tx, events.Event, time.Time) (int, error) {
	c.waits++
	return 0, nil
}

func (c *counting) Match(_ store.Tx, _ events.Event, _ time.Time, prepared any) (int, error) {
	c.matches++
	c.prepared = append(c.prepared, prepared)
	if c.fail {
		return 0, errors.New("subscriber failed")
	}
	return 1, nil
}

func newBus(t *testing.T) (*eventbus.Bus, store.Store, *counting) {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "e.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	schemas, err := schema.New()
	require.NoError(t, err)
	c := &counting{}
	b := eventbus.New(eventbus.Config{Store: st, Schemas: schemas, Waits: c, Clock: clock.NewFake(t0), MaxPayloadBytes: 1024})
	b.Subscribe(c)
	return b, st, c
}

// TestPublishTxOnce: PublishTx stores an event once per tenant and id; the waits and subscribers
// see a new event once, a replayed one never.
func TestPublishTxOnce(t *testing.T) {
	b, st, c := newBus(t)
	ev := events.Event{ID: "e1", TenantID: "acme", TypeID: typeID, Payload: json.RawMessage(`{"a":1}`), ReceivedAt: t0}
	for i, want := range []bool{true, false} {
		require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
			if i == 1 {
				ev.Payload = json.RawMessage(`{"a":2}`)
			}
			stored, inserted, err := b.PublishTx(tx, ev, t0)
			require.NoError(t, err)
			require.Equal(t, want, inserted)
			require.JSONEq(t, `{"a":1}`, string(stored.Payload), "the first event is kept")
			return nil
		}))
	}
	require.Equal(t, 1, c.waits)
	require.Equal(t, 1, c.matches)
	require.Equal(t, []any{nil}, c.prepared, "inside another write, nothing is prepared")

	// Publish prepares before its transaction and hands that to Match.
	_, err := b.Publish(context.Background(), bob, eventbus.PublishRequest{EventID: "e3", EventTypeID: typeID})
	require.NoError(t, err)
	require.Equal(t, []any{nil, "prepared e3"}, c.prepared)

	// A failing subscriber fails the publish, and nothing is stored.
	c.fail = true
	_, err = b.Publish(context.Background(), bob, eventbus.PublishRequest{EventID: "e2", EventTypeID: typeID})
	require.Equal(t, 500, problem.From(err).Status)
	_, err = st.Event(context.Background(), "acme", "e2")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestPublishValidatesAgainstType: a registered type's schema is checked inside the transaction;
// an invalid event is not stored.
func TestPublishValidatesAgainstType(t *testing.T) {
	b, st, _ := newBus(t)
	dev := auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleDeveloper}}
	_, err := b.CreateType(context.Background(), dev, eventbus.TypeRequest{EventTypeID: typeID,
		Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)})
	require.NoError(t, err)
	_, err = b.Publish(context.Background(), bob, eventbus.PublishRequest{EventID: "bad", EventTypeID: typeID, Payload: json.RawMessage(`{"n":"x"}`)})
	pe := problem.From(err)
	require.Equal(t, 422, pe.Status)
	require.Equal(t, "$.payload.n", pe.Issues[0].Path)
	_, err = st.Event(context.Background(), "acme", "bad")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = b.Publish(context.Background(), bob, eventbus.PublishRequest{EventID: "good", EventTypeID: typeID, Payload: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)

	// Schemas are bounded like every user schema.
	huge := `{"type":"object","description":"` + strings.Repeat("x", 70*1024) + `"}`
	_, err = b.CreateType(context.Background(), dev, eventbus.TypeRequest{EventTypeID: "gts.x.core.events.type.v1~vendor.app.orders.huge.v1~", Schema: json.RawMessage(huge)})
	pe = problem.From(err)
	require.Equal(t, 422, pe.Status)
	require.Equal(t, "SCHEMA_TOO_COMPLEX", pe.Issues[0].Code)
}

// TestEventPayloadBounded: a published event's payload nested deeper than the limit is refused
// with 422 naming the path, one over the size limit with 413; nothing is stored.
func TestEventPayloadBounded(t *testing.T) {
	b, _, c := newBus(t)
	deep := json.RawMessage(strings.Repeat("[", 500) + strings.Repeat("]", 500))
	_, err := b.Publish(context.Background(), bob, eventbus.PublishRequest{EventTypeID: typeID, Payload: deep})
	pe := problem.From(err)
	require.Equal(t, 422, pe.Status)
	require.Equal(t, "TOO_DEEP", pe.Issues[0].Code)
	require.Equal(t, "$.payload"+strings.Repeat("[0]", invocation.MaxJSONDepth+1), pe.Issues[0].Path)

	ok := json.RawMessage(`{"a":` + strings.Repeat("[", invocation.MaxJSONDepth-1) + strings.Repeat("]", invocation.MaxJSONDepth-1) + `}`)
	_, err = b.Publish(context.Background(), bob, eventbus.PublishRequest{EventTypeID: typeID, Payload: ok})
	require.NoError(t, err)

	big := json.RawMessage(`{"a":"` + strings.Repeat("x", 1024) + `"}`)
	_, err = b.Publish(context.Background(), bob, eventbus.PublishRequest{EventTypeID: typeID, Payload: big})
	require.Equal(t, 413, problem.From(err).Status)
	require.Equal(t, 1, c.matches)
}
