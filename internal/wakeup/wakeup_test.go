package wakeup_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/wakeup"
)

func open(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func recv(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for " + what)
	}
}

// TestAcrossNodes: an announcement on node A wakes node B's loops, not A's own; after B's
// listening connection is killed, B reconnects (waking its loops once, for what it may have missed)
// and hears A again. A hub in another schema of the same database hears nothing.
func TestAcrossNodes(t *testing.T) {
	url := pgtest.Schema(t)
	a, b := open(t, url), open(t, url)
	other := open(t, pgtest.Schema(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wokeA, wokeB, wokeOther := make(chan struct{}, 16), make(chan struct{}, 16), make(chan struct{}, 16)
	hubA := wakeup.New(a, wakeup.Options{Node: "a", Local: []func(){func() { wokeA <- struct{}{} }}})
	hubB := wakeup.New(b, wakeup.Options{Node: "b", Local: []func(){func() { wokeB <- struct{}{} }}, MinBackoff: 10 * time.Millisecond})
	hubO := wakeup.New(other, wakeup.Options{Node: "o", Local: []func(){func() { wokeOther <- struct{}{} }}})
	for _, h := range []*wakeup.Hub{hubA, hubB, hubO} {
		go h.Run(ctx)
	}
	// Each hub wakes its loops once when it starts listening.
	recv(t, wokeA, "A listening")
	recv(t, wokeB, "B listening")
	recv(t, wokeOther, "the other schema's hub listening")

	hubA.Announce()
	recv(t, wokeB, "B to hear A")
	require.Empty(t, wokeA, "A heard itself")

	// Kill B's listening connection from the server side.
	var killed int
	require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid() AND query LIKE '%'||$1||'%'`, b.WakeChannel()).Scan(&killed))
	require.Positive(t, killed)
	// A's connection was killed too (same channel): both reconnect and wake their loops once.
	recv(t, wokeB, "B to reconnect")
	deadline := time.Now().Add(10 * time.Second)
	for {
		hubA.Announce()
		select {
		case <-wokeB:
		case <-time.After(200 * time.Millisecond):
			require.True(t, time.Now().Before(deadline), "B did not hear A after reconnecting")
			continue
		}
		break
	}
	require.Empty(t, wokeOther, "a hub in another schema was woken")
}

// fakeTransport delivers every notification to every listener, in process.
type fakeTransport struct {
	mu        sync.Mutex
	listeners []func(string)
	sent      []string
}

func (f *fakeTransport) Notify(_ context.Context, payload string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, payload)
	for _, l := range f.listeners {
		l(payload)
	}
	return nil
}

func (f *fakeTransport) Listen(ctx context.Context, ready func(), fn func(string)) error {
	f.mu.Lock()
	f.listeners = append(f.listeners, fn)
	f.mu.Unlock()
	ready()
	<-ctx.Done()
	return ctx.Err()
}

// TestFinishedAcrossNodes: ends announced on node A reach node B's Finished callback (and wake its
// loops), never A's own; many ends are packed into notifications within PostgreSQL's payload bound.
func TestFinishedAcrossNodes(t *testing.T) {
	tr := &fakeTransport{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	gotA, gotB := map[string]bool{}, map[string]bool{}
	finished := func(into map[string]bool) func([]string) {
		return func(ids []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				into[id] = true
			}
		}
	}
	hubA := wakeup.New(tr, wakeup.Options{Node: "a", Finished: finished(gotA)})
	hubB := wakeup.New(tr, wakeup.Options{Node: "b", Finished: finished(gotB)})
	go hubA.Run(ctx)
	go hubB.Run(ctx)
	require.Eventually(t, func() bool { tr.mu.Lock(); defer tr.mu.Unlock(); return len(tr.listeners) == 2 }, 10*time.Second, time.Millisecond)

	const n = 600 // more than fit one notification
	for i := range n {
		hubA.Finished(fmt.Sprintf("inv_%040d", i))
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(gotB) == n }, 10*time.Second, time.Millisecond)
	mu.Lock()
	require.Empty(t, gotA, "A heard its own ends")
	mu.Unlock()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range tr.sent {
		require.LessOrEqual(t, len(p), 8000, "a notification within PostgreSQL's payload bound")
	}
}

// TestStopAcrossNodes: a stop asked on node A reaches node B's Stop with its ids (and not A's own),
// separately from the ends announced in the same moment.
func TestStopAcrossNodes(t *testing.T) {
	tr := &fakeTransport{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	stopped, finished := map[string]string{}, map[string]string{}
	record := func(into map[string]string, node string) func([]string) {
		return func(ids []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				into[id] = node
			}
		}
	}
	hubA := wakeup.New(tr, wakeup.Options{Node: "a", Stop: record(stopped, "a"), Finished: record(finished, "a")})
	hubB := wakeup.New(tr, wakeup.Options{Node: "b", Stop: record(stopped, "b"), Finished: record(finished, "b")})
	go hubA.Run(ctx)
	go hubB.Run(ctx)
	require.Eventually(t, func() bool { tr.mu.Lock(); defer tr.mu.Unlock(); return len(tr.listeners) == 2 }, 10*time.Second, time.Millisecond)

	hubA.Stop("inv_1")
	hubA.Finished("inv_2")
	hubA.Stop("inv_3")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(stopped) == 2 && len(finished) == 1
	}, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]string{"inv_1": "b", "inv_3": "b"}, stopped)
	require.Equal(t, map[string]string{"inv_2": "b"}, finished)
}
