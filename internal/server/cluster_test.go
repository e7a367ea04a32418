package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// TestOneLeaderAmongNodes: two servers on one PostgreSQL schema: exactly one leads (runs the
// singletons); when it shuts down it releases the lease and the other leads within a renewal
// period or two. On SQLite a server has no election: it always runs its singletons.
func TestOneLeaderAmongNodes(t *testing.T) {
	url := pgtest.Schema(t)
	type node struct {
		srv  *Server
		stop context.CancelFunc
		done chan error
	}
	start := func(id string) node {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		srv, err := New(ctx, Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Store: url, NodeID: id,
			LeaderTTL: 3 * time.Second, LeaderRenew: 100 * time.Millisecond})
		require.NoError(t, err)
		require.NotNil(t, srv.Leader, "a shared store elects a leader")
		ln, err := srv.Listen()
		require.NoError(t, err)
		n := node{srv: srv, stop: cancel, done: make(chan error, 1)}
		go func() { n.done <- srv.Serve(ctx, ln) }()
		return n
	}
	a, b := start("a"), start("b")
	leaders := func() (n int, who *node) {
		for _, x := range []*node{&a, &b} {
			if x.srv.Leader.Leading() {
				n++
				who = x
			}
		}
		return n, who
	}
	var leader *node
	require.Eventually(t, func() bool {
		n, who := leaders()
		leader = who
		return n == 1
	}, 10*time.Second, 10*time.Millisecond, "exactly one node leads")
	for range 20 { // and it stays one
		n, _ := leaders()
		require.LessOrEqual(t, n, 1)
		time.Sleep(10 * time.Millisecond)
	}
	other := &a
	if leader == &a {
		other = &b
	}
	stopped := time.Now()
	leader.stop()
	select {
	case err := <-leader.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not stop")
	}
	require.Eventually(t, other.srv.Leader.Leading, 5*time.Second, 10*time.Millisecond,
		"the other node leads once the lease is released")
	require.Less(t, time.Since(stopped), 3*time.Second, "took over before the TTL: the lease was released, not waited out")
	other.stop()
	<-other.done
}

// TestSQLiteAlwaysLeads: on the embedded store there is no election.
func TestSQLiteAlwaysLeads(t *testing.T) {
	srv, err := New(context.Background(), Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	require.NoError(t, err)
	defer srv.Close()
	require.Nil(t, srv.Leader)
	require.Nil(t, srv.hub)
}
