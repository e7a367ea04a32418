package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/trigger"
	"github.com/larkrun/lark/internal/webhook"
)

var d0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func newTrigger(id string) *trigger.Trigger {
	return &trigger.Trigger{ID: id, TenantID: "acme", EventTypeID: "gts.x.acme.orders.created.v1~", EntrypointID: "ep",
		Status: trigger.StatusActive, ExecutionContext: trigger.ContextSystem, CreatedAt: d0, UpdatedAt: d0}
}

// newStart is the start of invocation inv by trigger t1 from event 1.
func newStart(inv string) trigger.Start {
	return trigger.Start{TenantID: "acme", InvocationID: inv, TriggerID: "t1", EventSeqs: []int64{1}, EventIDs: []string{"e"},
		Params: json.RawMessage(`{}`), ReceivedAt: d0, StartedAt: d0}
}

func newSeen(inv string) webhook.Seen {
	return webhook.Seen{TenantID: "acme", TriggerID: "w1", Kind: webhook.KindSignature, Key: "sig", InvocationID: inv,
		DeliveryID: "d_" + inv, ExpiresAt: d0.Add(time.Hour)}
}

// TestConflictsKeepTheTransaction: an insert of the new domains that meets an existing key reports
// ErrConflict and leaves the transaction usable (PostgreSQL would abort it at a failed statement):
// the closure goes on writing after each conflict, and everything it wrote commits.
func TestConflictsKeepTheTransaction(t *testing.T) {
	t.Parallel()
	s := openTemp(t, pgstore.Options{MaxConns: 2})
	defer s.Close()
	ctx := context.Background()
	sec := store.Secret{TenantID: "acme", Name: "k", AllowedHosts: []string{"a.example"}, Version: 1, CreatedAt: d0, UpdatedAt: d0}
	ver := store.SecretVersion{TenantID: "acme", Name: "k", Version: 1, CreatedAt: d0, KeyID: "key1", Sealed: []byte{0, 1, 2, 0xff}}
	dl := trigger.DeadLetter{ID: "d1", TenantID: "acme", TriggerID: "t1", InvocationID: "inv1", Params: json.RawMessage(`{}`), CreatedAt: d0}
	ev := events.Event{Seq: 7}
	inserts := []struct {
		name string
		do   func(store.Tx) error
	}{
		{"event type", func(x store.Tx) error {
			return x.InsertEventType(events.Type{ID: "gts.x.acme.orders.created.v1~", TenantID: "acme", Scope: "tenant", CreatedAt: d0})
		}},
		{"trigger", func(x store.Tx) error { return x.InsertTrigger(newTrigger("t1")) }},
		{"trigger start", func(x store.Tx) error { return x.InsertTriggerStart(newStart("inv1")) }},
		{"trigger start, same event", func(x store.Tx) error { return x.InsertTriggerStart(newStart("inv2")) }},
		{"pending", func(x store.Tx) error { return x.AddPending("acme", "t1", ev) }},
		{"dead letter", func(x store.Tx) error { return x.InsertDeadLetter(dl) }},
		{"secret", func(x store.Tx) error { return x.InsertSecret(sec, ver) }},
		{"webhook trigger", func(x store.Tx) error {
			return x.InsertWebhookTrigger(&webhook.Trigger{ID: "w1", TenantID: "acme", Name: "w1", EntrypointID: "ep",
				Status: webhook.StatusActive, CreatedAt: d0, UpdatedAt: d0})
		}},
		{"webhook seen", func(x store.Tx) error { return x.RememberWebhook(newSeen("inv1"), d0) }},
	}
	// The closure runs on the committer's goroutine: it reports by returning, never by t.Fatal.
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		for _, in := range inserts {
			if in.name == "trigger start, same event" {
				continue
			}
			if err := in.do(x); err != nil {
				return fmt.Errorf("%s: %w", in.name, err)
			}
			// The same insert again conflicts; the next statement still runs.
			if err := wantConflict(in.do(x)); err != nil {
				return fmt.Errorf("%s again: %w", in.name, err)
			}
			if err := x.AddTriggerMetrics(trigger.MetricsDelta{TenantID: "acme", TriggerID: "t1", Hour: d0,
				Counters: trigger.Counters{Received: 1}, LatencyMS: -1}); err != nil {
				return fmt.Errorf("a write after the conflict of %s: %w", in.name, err)
			}
		}
		if err := wantConflict(inserts[3].do(x)); err != nil {
			return fmt.Errorf("another invocation for the same first event: %w", err)
		}
		return nil
	}))
	rows, err := s.TriggerMetrics(ctx, "acme", "t1", d0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.EqualValues(t, len(inserts)-1, rows[0].Received, "every write after a conflict committed")
	sealed, err := s.SealedSecret(ctx, "acme", "k")
	require.NoError(t, err)
	require.Equal(t, ver.Sealed, sealed.Version.Sealed, "sealed bytes round-trip as bytea")
	_, err = s.WebhookSeenAt(ctx, "acme", "w1", webhook.KindSignature, "sig", d0)
	require.NoError(t, err)
}

// contenders counts contend's calls.
var contenders atomic.Int64

// contend runs setup (when set), then hold in store b, keeps b's transaction open, runs wait in store
// a, waits (with a deadline) until a's statement is blocked on b's uncommitted row, lets b commit,
// and returns a's result and a (closed when t ends): two processes writing the same key at once.
func contend(t *testing.T, setup, hold, wait func(store.Tx) error) (store.Store, error) {
	t.Helper()
	url := pgtest.Schema(t)
	ctx := context.Background()
	app := fmt.Sprintf("contend_%d_%d", time.Now().UnixNano(), contenders.Add(1)) // unique among parallel tests
	a, err := pgstore.Open(ctx, url+"&application_name="+app, pgstore.Options{MaxConns: 3, Retry: pgstore.RetryPolicy{Attempts: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	// b runs its statements as it makes them (NoPipeline), so its row is on the server while it
	// holds; a is pipelined, as a server's store is: its conflict is met at its commit.
	b, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 3, NoPipeline: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	if setup != nil {
		require.NoError(t, b.Update(ctx, setup))
	}
	held, release := make(chan struct{}), make(chan struct{})
	bDone := make(chan error, 1)
	go func() {
		bDone <- b.Update(ctx, func(x store.Tx) error {
			if err := hold(x); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-bDone:
		t.Fatalf("b: %v", err)
	}
	aDone := make(chan error, 1)
	go func() { aDone <- a.Update(ctx, wait) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting int
		require.NoError(t, b.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting))
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("a's write never waited on b's row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	require.NoError(t, <-bDone)
	return a, <-aDone
}

// TestTriggerStartAcrossProcesses: two processes starting an invocation for the same event of a
// trigger at once: the second waits for the first and gets ErrConflict (each event starts once).
func TestTriggerStartAcrossProcesses(t *testing.T) {
	t.Parallel()
	_, err := contend(t, nil,
		func(x store.Tx) error { return x.InsertTriggerStart(newStart("inv_b")) },
		func(x store.Tx) error { return x.InsertTriggerStart(newStart("inv_a")) })
	require.ErrorIs(t, err, store.ErrConflict)
}

// TestRememberWebhookAcrossProcesses: the same signature delivered to two processes at once is
// accepted by one only (the replay memory).
func TestRememberWebhookAcrossProcesses(t *testing.T) {
	t.Parallel()
	_, err := contend(t, nil,
		func(x store.Tx) error { return x.RememberWebhook(newSeen("inv_b"), d0) },
		func(x store.Tx) error { return x.RememberWebhook(newSeen("inv_a"), d0) })
	require.ErrorIs(t, err, store.ErrConflict)
}

// TestTriggerMetricsAcrossProcesses: two processes counting into the same hourly row at once lose
// no count and no latency observation.
func TestTriggerMetricsAcrossProcesses(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	const perStore = 25
	var stores []*pgstore.Store
	for range 2 {
		s, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 3})
		require.NoError(t, err)
		defer s.Close()
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*perStore)
	for _, s := range stores {
		for i := range perStore {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.Update(ctx, func(x store.Tx) error {
					return x.AddTriggerMetrics(trigger.MetricsDelta{TenantID: "acme", TriggerID: "t1", Hour: d0,
						Counters: trigger.Counters{Triggered: 1}, LatencyMS: int64(i)})
				})
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	rows, err := stores[0].TriggerMetrics(ctx, "acme", "t1", d0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.EqualValues(t, 2*perStore, rows[0].Triggered)
	var n int64
	for _, c := range rows[0].Latency {
		n += c
	}
	require.EqualValues(t, 2*perStore, n, "latency observations")
}

// TestNewListsPage: the lists of the new domains page through sort keys of every kind: an integer
// (a delivery's status_code, whose cursor value comes back from JSON as a float), a computed one
// (an event type's scope) and a generated id column (secrets).
func TestNewListsPage(t *testing.T) {
	t.Parallel()
	s := openTemp(t, pgstore.Options{MaxConns: 2})
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		for i := range 5 {
			d := webhook.Delivery{ID: fmt.Sprintf("d%d", i), TenantID: "acme", TriggerID: "w1", ReceivedAt: d0.Add(time.Duration(i) * time.Second),
				StatusCode: 200 + 100*(i%3), Outcome: "accepted"}
			if err := x.RecordWebhookDelivery(d, 10); err != nil {
				return err
			}
			for _, scope := range []string{"", "acme"} {
				if err := x.InsertEventType(events.Type{ID: fmt.Sprintf("gts.x.t%d.v1~", i), TenantID: scope, CreatedAt: d0}); err != nil {
					return err
				}
			}
			sec := store.Secret{TenantID: "acme", Name: fmt.Sprintf("s%d", 4-i), Version: 1, CreatedAt: d0, UpdatedAt: d0}
			if err := x.InsertSecret(sec, store.SecretVersion{TenantID: "acme", Name: sec.Name, Version: 1, CreatedAt: d0, KeyID: "k", Sealed: []byte{1}}); err != nil {
				return err
			}
		}
		return nil
	}))
	walk := func(list func(cursor string) (items []string, next string, err error)) []string {
		var all []string
		cur := ""
		for range 20 {
			items, next, err := list(cur)
			require.NoError(t, err)
			all = append(all, items...)
			if next == "" {
				return all
			}
			cur = next
		}
		t.Fatal("the walk did not end")
		return nil
	}
	byCode := []odata.OrderItem{{Field: "status_code"}, {Field: "received_at"}}
	got := walk(func(c string) ([]string, string, error) {
		p, err := s.WebhookDeliveries(ctx, "acme", "w1", store.ListQuery{Limit: 2, Cursor: c, OrderBy: byCode})
		var ids []string
		for _, d := range p.Items {
			ids = append(ids, d.ID)
		}
		return ids, p.NextCursor, err
	})
	require.Equal(t, []string{"d0", "d3", "d1", "d4", "d2"}, got)
	byScope := []odata.OrderItem{{Field: "scope", Desc: true}, {Field: "event_type_id"}}
	got = walk(func(c string) ([]string, string, error) {
		p, err := s.ListEventTypes(ctx, "acme", store.ListQuery{Limit: 3, Cursor: c, OrderBy: byScope})
		var ids []string
		for _, et := range p.Items {
			ids = append(ids, et.TenantID+"/"+et.ID)
		}
		return ids, p.NextCursor, err
	})
	require.Len(t, got, 10)
	require.Equal(t, "acme/gts.x.t0.v1~", got[0], "tenant before platform")
	require.Equal(t, "/gts.x.t0.v1~", got[5])
	got = walk(func(c string) ([]string, string, error) {
		p, err := s.ListSecrets(ctx, "acme", store.ListQuery{Limit: 2, Cursor: c})
		var names []string
		for _, sec := range p.Items {
			names = append(names, sec.Name)
		}
		return names, p.NextCursor, err
	})
	require.Equal(t, []string{"s0", "s1", "s2", "s3", "s4"}, got)
}

// TestTriggerMetricsSameRowTwice: one call with several deltas of the same hourly row (PostgreSQL
// refuses an upsert that meets a row twice) adds them all up.
func TestTriggerMetricsSameRowTwice(t *testing.T) {
	t.Parallel()
	s := openTemp(t, pgstore.Options{MaxConns: 2})
	defer s.Close()
	ctx := context.Background()
	delta := func(trg string, at time.Duration, c trigger.Counters, latency int64) trigger.MetricsDelta {
		return trigger.MetricsDelta{TenantID: "acme", TriggerID: trg, Hour: d0.Add(at), Counters: c, LatencyMS: latency}
	}
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		return x.AddTriggerMetrics(
			delta("t2", 0, trigger.Counters{Received: 1}, -1),
			delta("t1", 0, trigger.Counters{Received: 2, FilteredOut: 1}, -1),
			delta("t1", 10*time.Minute, trigger.Counters{Triggered: 1}, 7),
			delta("t1", 20*time.Minute, trigger.Counters{Received: 3, Failed: 1}, 8),
			delta("t1", time.Hour, trigger.Counters{Received: 5}, -1))
	}))
	rows, err := s.TriggerMetrics(ctx, "acme", "t1", d0)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, trigger.Counters{Received: 5, FilteredOut: 1, Triggered: 1, Failed: 1}, rows[0].Counters)
	require.EqualValues(t, 2, rows[0].Latency[3], "7 and 8 ms fall in the (5, 10] bucket")
	require.Equal(t, trigger.Counters{Received: 5}, rows[1].Counters)
	rows, err = s.TriggerMetrics(ctx, "acme", "t2", d0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.EqualValues(t, 1, rows[0].Received)
}

// TestSecretUpdateAcrossProcesses: a secret's read-modify-write (Tx.Secret, then UpdateSecret, which
// has no revision to check) in one process waits for another process's update in flight and then
// reads its result, so neither update is lost and the version never goes back.
func TestSecretUpdateAcrossProcesses(t *testing.T) {
	t.Parallel()
	v := func(version int64) store.SecretVersion {
		return store.SecretVersion{TenantID: "acme", Name: "k", Version: version, CreatedAt: d0, KeyID: "key1", Sealed: []byte{byte(version)}}
	}
	var seen store.Secret
	a, err := contend(t,
		func(x store.Tx) error {
			return x.InsertSecret(store.Secret{TenantID: "acme", Name: "k", Description: "first", Version: 1, CreatedAt: d0, UpdatedAt: d0}, v(1))
		},
		// b sets a new value (version 2).
		func(x store.Tx) error {
			cur, err := x.Secret("acme", "k")
			if err != nil {
				return err
			}
			if err := x.AddSecretVersion(v(cur.Version+1), 5); err != nil {
				return err
			}
			cur.Version++
			return x.UpdateSecret(cur)
		},
		// a changes the description only, from what it read.
		func(x store.Tx) error {
			cur, err := x.Secret("acme", "k")
			if err != nil {
				return err
			}
			seen = cur
			cur.Description = "second"
			return x.UpdateSecret(cur)
		})
	require.NoError(t, err)
	require.EqualValues(t, 2, seen.Version, "a read the secret as b left it")
	require.Len(t, seen.Versions, 2)
	got, err := a.Secret(context.Background(), "acme", "k")
	require.NoError(t, err)
	require.Equal(t, "second", got.Description)
	require.EqualValues(t, 2, got.Version)
	sealed, err := a.SealedSecret(context.Background(), "acme", "k")
	require.NoError(t, err, "the latest version still has its value")
	require.Equal(t, []byte{2}, sealed.Version.Sealed)
}

// wantConflict is nil if err is store.ErrConflict, else an error saying what came instead.
func wantConflict(err error) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil
	case err == nil:
		return errors.New("no error, want ErrConflict")
	default:
		return fmt.Errorf("%w, want ErrConflict", err)
	}
}
