// Package leader elects one node of a cluster, the leader, by a lease row in the store (a
// store.LeaderTx claim): the node holding the lease runs the singleton background loops (see
// internal/loops), the others only serve the API and claim work.
//
// Every Renew period each node makes one claim: the holder renews the lease until now+TTL; another
// node takes it only once it has expired. The holder stops leading (its loops are cancelled) as soon
// as a renewal fails and the next one could come after the expiry, so it never leads past the
// expiry it wrote. Failover bound: when the leader dies (kill -9, a partition), the lease expires at
// most TTL after its last renewal, and another node's next claim, at most Renew later, takes it:
// another node leads within TTL + Renew. A node that stops cleanly releases the lease, and another
// leads within Renew.
//
// Times are the nodes' own clocks: their skew must stay well under TTL - Renew (NTP keeps it to
// milliseconds). Leadership is an efficiency, not the guard against double work: two nodes may both
// believe they lead for the moment a cancelled loop takes to stop, so every singleton's writes are
// conditional in the store (schedule runs unique per instant, claims under leases, trigger starts
// unique per trigger and first event).
//
// The embedded SQLite store is one process's only (store.Store.Exclusive): there the server runs
// the singletons without an election, the single node always leading.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/store"
)

// Defaults of Options.
const (
	DefaultName  = "singletons"
	DefaultTTL   = 15 * time.Second
	DefaultRenew = 5 * time.Second
)

// Options configure an Elector. The zero value is usable.
type Options struct {
	// Name is the lease's name (default DefaultName).
	Name string
	// Holder identifies this node in the lease (default NodeID()).
	Holder string
	// TTL is how long a claim or renewal holds the lease (default DefaultTTL).
	TTL time.Duration
	// Renew is the time between two claims (default DefaultRenew); it must be under TTL (New caps it
	// at TTL/3).
	Renew time.Duration
	// Clock tells the time the lease's expiry is computed from (default: the real clock).
	Clock clock.Clock
	// Logger logs leadership changes (default slog.Default()).
	Logger *slog.Logger
}

// Direct is implemented by stores that can claim and release the lease outside their write queue
// (pgstore): a renewal must not wait behind a backlog of group-committed writes, or a busy leader
// would lose its lease for nothing. Other stores claim through Update.
type Direct interface {
	ClaimLeaderLeaseNow(ctx context.Context, c store.LeaderClaim) (store.LeaderLease, error)
	ReleaseLeaderLeaseNow(ctx context.Context, name, holder string, now time.Time) error
}

// Store is the store methods the elector uses (store.Store has them all): Update, to claim and
// release its lease (a store that is also a Direct claims outside its write queue).
type Store interface {
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Elector campaigns for one lease on behalf of this node.
type Elector struct {
	st Store
	o  Options

	mu sync.Mutex
	// until is when this node's lease, as it last wrote it, expires (zero: not leading).
	until   time.Time
	leading atomic.Bool
	term    atomic.Int64
}

// New returns an elector for st.
func New(st Store, o Options) *Elector {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Holder == "" {
		o.Holder = NodeID()
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Renew <= 0 {
		o.Renew = DefaultRenew
	}
	o.Renew = min(o.Renew, o.TTL/3)
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Elector{st: st, o: o}
}

// NodeID is a node identity unique to this process: host name, process id and a random suffix.
func NodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Holder is this node's identity in the lease.
func (e *Elector) Holder() string { return e.o.Holder }

// Leading reports whether this node held the lease at its last claim and still does.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Term is the lease's term at this node's last successful claim (a fencing token: it moves each
// time the lease changes hands).
func (e *Elector) Term() int64 { return e.term.Load() }

// Bound is the failover bound: the longest a dead leader's lease keeps the others from leading.
func (e *Elector) Bound() time.Duration { return e.o.TTL + e.o.Renew }

// Tick makes one claim at the clock's now and reports whether this node leads until its next Tick
// (Run calls it every Renew period; tests call it with a fake clock). A claim is given one Renew
// period. A failed claim keeps the leadership only while the next claim would still come before the
// expiry this node last wrote.
func (e *Elector) Tick(ctx context.Context) bool {
	now := e.o.Clock.Now()
	claim := store.LeaderClaim{Name: e.o.Name, Holder: e.o.Holder, Now: now, ExpiresAt: now.Add(e.o.TTL)}
	var l store.LeaderLease
	var err error
	// The claim may take up to one renewal period: a claim stuck longer fails, and the check
	// below then steps down in time.
	cctx, cancel := context.WithTimeout(ctx, e.o.Renew)
	defer cancel()
	if d, ok := e.st.(Direct); ok {
		l, err = d.ClaimLeaderLeaseNow(cctx, claim)
	} else {
		err = e.st.Update(cctx, func(x store.Tx) error {
			var err error
			l, err = x.ClaimLeaderLease(claim)
			return err
		})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	was := e.leading.Load()
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.o.Logger.Warn("leader lease: claim failed", "lease", e.o.Name, "holder", e.o.Holder, "err", err)
		}
		if was && !e.o.Clock.Now().Add(e.o.Renew).Before(e.until) {
			e.until = time.Time{}
		}
	case l.Holder == e.o.Holder:
		e.until = l.ExpiresAt
		e.term.Store(l.Term)
	default:
		e.until = time.Time{}
	}
	leading := !e.until.IsZero()
	e.leading.Store(leading)
	if leading != was {
		if leading {
			e.o.Logger.Info("leader lease taken: this node runs the singleton loops", "lease", e.o.Name, "holder", e.o.Holder, "term", e.term.Load())
		} else {
			e.o.Logger.Warn("leader lease lost: stopping the singleton loops", "lease", e.o.Name, "holder", e.o.Holder, "held_by", l.Holder)
		}
	}
	return leading
}

// Release gives up the lease if this node holds it, so that another node takes it at its next
// claim instead of waiting for the expiry.
func (e *Elector) Release(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.until = time.Time{}
	e.leading.Store(false)
	now := e.o.Clock.Now()
	if d, ok := e.st.(Direct); ok {
		return d.ReleaseLeaderLeaseNow(ctx, e.o.Name, e.o.Holder, now)
	}
	return e.st.Update(ctx, func(x store.Tx) error { return x.ReleaseLeaderLease(e.o.Name, e.o.Holder, now) })
}

// Run campaigns every Renew period until ctx ends. While this node leads, lead runs with a context
// that is cancelled when the lease is lost or ctx ends; Run waits for lead to return before it
// claims again after a loss, and before it releases the lease and returns.
func (e *Elector) Run(ctx context.Context, lead func(context.Context)) {
	var (
		cancel context.CancelFunc
		done   chan struct{}
	)
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
	}
	t := time.NewTicker(e.o.Renew)
	defer t.Stop()
	for {
		leading := e.Tick(ctx)
		if done != nil {
			select {
			case <-done: // lead returned by itself: start it again while leading
				cancel()
				cancel, done = nil, nil
			default:
			}
		}
		switch {
		case leading && cancel == nil:
			cancel, done = start(ctx, lead)
		case !leading:
			stop()
		}
		select {
		case <-ctx.Done():
			stop()
			rctx, rcancel := context.WithTimeout(context.Background(), e.o.Renew)
			if err := e.Release(rctx); err != nil {
				e.o.Logger.Warn("leader lease: release failed; another node leads once it expires", "lease", e.o.Name, "err", err)
			}
			rcancel()
			return
		case <-t.C:
		}
	}
}

// start runs lead in a goroutine under a child of ctx; done closes when it returns.
func start(ctx context.Context, lead func(context.Context)) (context.CancelFunc, chan struct{}) {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); lead(lctx) }()
	return cancel, done
}
