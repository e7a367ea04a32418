// Package bulklane serves each tenant's bulky requests (large bodies) one at a time, in arrival
// order, so that one tenant's megabytes of JSON to check, decode and encode occupy at most one of
// the process's cores, however many such requests it sends at once, and the other tenants' small
// requests find a core free.
//
// A request enters its tenant's lane (Lanes.Enter) before its body is read and leaves it when it
// has been answered. While it waits on something that is not its own CPU work — its admission, its
// execution, which has a CPU share of its own — it gives the lane up (Pause), and takes it again,
// in order, to encode its answer. A tenant's bulky requests therefore queue behind each other only
// for the CPU work that is theirs; the requests of other tenants never queue behind them.
package bulklane

import (
	"context"
	"sync"
	"sync/atomic"
)

// Lanes are the lanes of every tenant; the zero value is not usable, use New.
type Lanes struct {
	mu    sync.Mutex
	lanes map[string]*lane
	// waiting counts the requests waiting to enter (or re-enter) a lane.
	waiting atomic.Int64
}

// lane is one tenant's: a slot whose blocked senders the Go runtime serves in arrival order.
type lane struct {
	slot  chan struct{}
	users int // holds and waiters; the lane is dropped when none is left
}

// New returns empty lanes.
func New() *Lanes { return &Lanes{lanes: map[string]*lane{}} }

// Waiting is the number of requests waiting for their tenant's lane.
func (l *Lanes) Waiting() int64 {
	if l == nil {
		return 0
	}
	return l.waiting.Load()
}

// Enter waits until tenant's lane is free and returns the request's hold on it, or ctx's error
// if ctx ended first (the request holds nothing then). The hold must be given back with Leave.
func (l *Lanes) Enter(ctx context.Context, tenant string) (*Hold, error) {
	l.mu.Lock()
	ln := l.lanes[tenant]
	if ln == nil {
		ln = &lane{slot: make(chan struct{}, 1)}
		l.lanes[tenant] = ln
	}
	ln.users++
	l.mu.Unlock()
	h := &Hold{l: l, tenant: tenant, ln: ln}
	if err := h.take(ctx); err != nil {
		l.drop(tenant, ln)
		return nil, err
	}
	return h, nil
}

// drop forgets one user of tenant's lane, and the lane when it was the last.
func (l *Lanes) drop(tenant string, ln *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln.users--; ln.users == 0 {
		delete(l.lanes, tenant)
	}
}

// Hold is a request's place in its tenant's lane.
type Hold struct {
	l      *Lanes
	tenant string
	ln     *lane

	mu      sync.Mutex
	holding bool
	left    bool
}

// take waits for the lane's slot.
func (h *Hold) take(ctx context.Context) error {
	select {
	case h.ln.slot <- struct{}{}:
	default:
		h.l.waiting.Add(1)
		defer h.l.waiting.Add(-1)
		select {
		case h.ln.slot <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.holding = true
	return nil
}

// release frees the lane's slot if h holds it.
func (h *Hold) release() {
	if h.holding {
		h.holding = false
		<-h.ln.slot
	}
}

// Leave gives the lane up for good; it may be called more than once.
func (h *Hold) Leave() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.left {
		return
	}
	h.left = true
	h.release()
	h.l.drop(h.tenant, h.ln)
}

// Pause gives the lane up while the request waits on other work, and returns resume, which takes
// it again, in order (waiting at most until ctx ends: a request whose caller went away encodes its
// answer outside the lane).
func (h *Hold) Pause(ctx context.Context) (resume func()) {
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	if h.left || !h.holding {
		h.mu.Unlock()
		return func() {}
	}
	h.release()
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.left && !h.holding {
			_ = h.take(ctx)
		}
	}
}

type holdKey struct{}

// With returns ctx carrying h, for Pause.
func With(ctx context.Context, h *Hold) context.Context { return context.WithValue(ctx, holdKey{}, h) }

// Pause pauses the hold ctx carries (With), if any; see Hold.Pause.
func Pause(ctx context.Context) (resume func()) {
	h, _ := ctx.Value(holdKey{}).(*Hold)
	return h.Pause(ctx)
}
