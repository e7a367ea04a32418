package workflow

import (
	"context"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// heldStart is a plain sync call's start (created, started and the lease), held back while the
// workflow's first activation runs, as a sync function call's is (invoke's pendingStart). It goes
// to the writer, with the journal entries held behind it, when the run first needs something
// durable other than its end: a side effect (an HTTP call, a child: host.Host.Flush), a wait, a
// continue-as-new; or when the run has lasted delay; whichever comes first. A run that ends before
// any of them is written once: the start, its journal and its outcome in one transaction
// (complete.Completer.CompleteStart), one commit for the whole call.
//
// Crash semantics are those of a sync function call: while the start is held, nothing of the call
// is on disk, so a crash leaves no trace of it and the caller sees a failed request it can retry.
// Nothing the run did is lost that a side effect depended on: every side effect sends the start and
// the entries before it and waits for them (automatic checkpointing's rule), and events emitted by
// the held entries are published only by the write that records them.
type heldStart struct {
	events []invocation.Event // created, started
	lease  store.Scheduling   // the started attempt's lease
	delay  time.Duration

	mu    sync.Mutex
	state holdState
	timer *time.Timer
	send  func() // enqueues the start on the run's host (set by hold)
}

type holdState int

const (
	held   holdState = iota // not written yet
	sent                    // enqueued on its own, ahead of the run's journal writes
	merged                  // written with the run's outcome
)

// HoldStart is c with the invocation's start (its created and started events, and the lease)
// held back while the activation runs, and written with its outcome when the activation ends
// before delay has passed, before any side effect and without waiting (heldStart).
func (c Claim) HoldStart(events []invocation.Event, lease store.Scheduling, delay time.Duration) Claim {
	c.held = &heldStart{events: events, lease: lease, delay: delay}
	return c
}

// holdStart makes the run's host the one that sends the claim's held start (on its own, when the
// delay passes or something must be durable before the end), and starts the delay's timer; a
// negative delay sends it at once.
func (x *wfRun) holdStart() {
	hs := x.c.held
	if hs == nil {
		return
	}
	x.held = hs
	hs.send = func() {
		x.h.EnqueueStart(x.ctx, func(tx store.Tx) (invocation.Record, error) { return tx.StartInvocation(hs.events, hs.lease) })
	}
	x.h.BeforeFlush(x.unhold)
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.delay < 0 {
		hs.sendLocked()
		return
	}
	hs.timer = time.AfterFunc(hs.delay, hs.release)
}

// keeps reports whether the start is still held: the run's journal entries stay with it.
func (hs *heldStart) keeps() bool {
	if hs == nil {
		return false
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.state == held
}

// release sends the start on its own if it is still held (the delay passed).
func (hs *heldStart) release() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.sendLocked()
}

func (hs *heldStart) sendLocked() {
	if hs.state == held {
		hs.state = sent
		hs.stopTimer()
		hs.send()
	}
}

// merge takes the held start for the run's closing write; false when it was sent already.
func (hs *heldStart) merge() bool {
	if hs == nil {
		return false
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.state != held {
		return false
	}
	hs.state = merged
	hs.stopTimer()
	return true
}

// stopTimer stops the delay's timer, if it runs; hs.mu is held.
func (hs *heldStart) stopTimer() {
	if hs.timer != nil {
		hs.timer.Stop()
	}
}

// unhold sends the held start, then the journal entries the checkpointing strategy would have
// written meanwhile (wfRecord), so that what follows (a side effect, a wait) comes after them. It
// may be called from the goroutines of a step's concurrent HTTP calls (through host.Host.Flush).
func (x *wfRun) unhold() {
	hs := x.held
	if hs == nil {
		return
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.sendLocked()
	if x.heldN > 0 && hs.state == sent {
		_ = x.h.EnqueueJournal(context.WithoutCancel(x.ctx), x.buffered[:x.heldN])
		x.buffered, x.checkpointed, x.heldN, x.heldSeq = x.buffered[x.heldN:], x.heldSeq, 0, 0
	}
}
