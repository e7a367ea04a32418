package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/invocation"
)

// queue is a Claimer over attempts held in memory: each claim takes at most limit of them.
type queue struct {
	mu      sync.Mutex
	pending []attempt.Attempt
}

func (q *queue) Claim(_ context.Context, limit int) ([]attempt.Attempt, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(limit, len(q.pending))
	out := q.pending[:n:n]
	q.pending = q.pending[n:]
	return out, nil
}

func (q *queue) NextDue(context.Context) (*time.Time, error) { return nil, nil }
func (q *queue) Purge(context.Context) error                 { return nil }

// printer is a Runner that prints what it runs and stops the dispatcher after the last attempt.
type printer struct {
	left int
	stop context.CancelFunc
}

func (p *printer) Run(_ context.Context, a attempt.Attempt) {
	fmt.Printf("%s %s (lease %s)\n", a.Kind, a.Invocation.ID, a.Lease.Owner)
	if p.left--; p.left == 0 {
		p.stop()
	}
}

// A Dispatcher moves attempts, plain data, from a Claimer to a Runner; in Lark those are
// dispatch.StoreClaimer and execution.Executor. One slot runs the attempts one after another, in
// claim order; Run returns once its context ends and the running attempt has finished.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	q := &queue{pending: []attempt.Attempt{
		{Kind: attempt.KindRun, Invocation: invocation.Record{ID: "inv_1"}, Lease: attempt.Lease{Owner: "node-a/1/1"}},
		{Kind: attempt.KindCompensate, Invocation: invocation.Record{ID: "inv_2"}, Lease: attempt.Lease{Owner: "node-a/1/1/compensate"}},
	}}
	d := dispatch.New(q, &printer{left: 2, stop: stop}, dispatch.Options{Slots: 1})
	d.Run(ctx)
	// Output:
	// run inv_1 (lease node-a/1/1)
	// compensate inv_2 (lease node-a/1/1/compensate)
}
