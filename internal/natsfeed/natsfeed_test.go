package natsfeed_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/natsbridge"
	"github.com/larkrun/lark/internal/natsfeed"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
	"github.com/larkrun/lark/internal/trigger"
)

// failingLister cannot list the tenants.
type failingLister struct{}

func (failingLister) AllTenants(context.Context) ([]tenant.Policy, error) {
	return nil, errors.New("store down")
}

func (failingLister) ListTriggers(context.Context, string, store.ListQuery) (store.Page[trigger.Trigger], error) {
	return store.Page[trigger.Trigger]{}, nil
}

// TestStartErrorStillCloses: a feed whose start could not list the triggers reports it, and Close
// still stops it promptly (the server's shutdown must not hang on it).
func TestStartErrorStillCloses(t *testing.T) {
	f := natsfeed.New(nil, nil, nil, nil)
	require.EqualError(t, f.Start(context.Background(), failingLister{}), "store down")
	closed := make(chan struct{})
	go func() { f.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	_, _, ok := f.Connection("acme", "t")
	require.False(t, ok, "nothing is subscribed")
}

func TestConsumerNameIsStableAndValid(t *testing.T) {
	a := natsfeed.ConsumerName("acme", "orders")
	require.Equal(t, a, natsfeed.ConsumerName("acme", "orders"))
	require.NotEqual(t, a, natsfeed.ConsumerName("acme", "orders2"))
	require.NotEqual(t, natsfeed.ConsumerName("a", "b.c"), natsfeed.ConsumerName("a.b", "c"))
	require.Regexp(t, `^[A-Za-z0-9_-]{1,64}$`, a)
}

// refusingBridge refuses every subscription.
type refusingBridge struct{}

func (refusingBridge) Subscribe(context.Context, natsbridge.SubscriptionSpec) (*natsbridge.Subscription, error) {
	return nil, errors.New("no stream captures the subject")
}

// emptyLister has no tenants.
type emptyLister struct{}

func (emptyLister) AllTenants(context.Context) ([]tenant.Policy, error) { return nil, nil }

func (emptyLister) ListTriggers(context.Context, string, store.ListQuery) (store.Page[trigger.Trigger], error) {
	return store.Page[trigger.Trigger]{}, nil
}

// TestAwaitAfterAFailedSubscription: Await returns as soon as the feed has tried the trigger, even
// when the subscription could not be made (the trigger then has none: no connection to report),
// and at once for a trigger without a subject.
func TestAwaitAfterAFailedSubscription(t *testing.T) {
	t.Parallel()
	f := natsfeed.New(refusingBridge{}, nil, nil, nil)
	require.NoError(t, f.Start(context.Background(), emptyLister{}))
	t.Cleanup(f.Close)
	trg := trigger.Trigger{ID: "t", TenantID: "acme", EventTypeID: "x.y~", NATSSubject: "orders.created", Status: trigger.StatusActive}
	f.Changed(trg, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.Await(ctx, trg)
	require.NoError(t, ctx.Err(), "Await returned once the attempt failed, not at its deadline")
	_, _, ok := f.Connection("acme", "t")
	require.False(t, ok)
	trg.NATSSubject = ""
	f.Await(ctx, trg)
	require.NoError(t, ctx.Err())
}
