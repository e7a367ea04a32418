package workflow

import (
	"context"
	"time"

	"github.com/larkrun/lark/internal/host"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
)

// liveRun is one workflow execution, live across its activations.
type liveRun struct {
	handover chan Claim    // the next Claim of the invocation, to the waiting execution
	drop     chan struct{} // closed when the wait must end without a handover
}

// Claim is one activation of a workflow: the claimed record (its lease) and where the executor
// that claimed it waits for the outcome.
type Claim struct {
	rec   invocation.Record
	reply chan activation
	// held, when set, is the invocation's start, not yet written (a plain sync call's first
	// activation: HoldStart).
	held *heldStart
	// spanCtx carries the span of the activation (host's trace.go), for the live execution it is handed to.
	spanCtx context.Context
}

// activation is the outcome of one activation: the record after it, or why it was not recorded.
type activation struct {
	rec invocation.Record
	err error
}

func newLiveRun() *liveRun {
	return &liveRun{handover: make(chan Claim, 1), drop: make(chan struct{})}
}

// NewClaim is the claim of an activation of rec, leased to this process.
func NewClaim(rec invocation.Record) Claim { return Claim{rec: rec, reply: make(chan activation, 1)} }

// Invocation is the claimed record.
func (c Claim) Invocation() invocation.Record { return c.rec }

// liveEligible reports whether a wait may be spent in memory: a timer due within LiveWait, an
// event, or a child.
func (s *Engine) liveEligible(p *sandbox.Park, now time.Time) bool {
	if s.cfg.LiveWait < 0 {
		return false
	}
	return (p.Kind != "timer" && p.Kind != "retry") || p.Until.Sub(now) <= s.cfg.LiveWait
}

// registerLive records that the execution of invocation id waits in memory; false when MaxLive
// executions already do.
func (s *Engine) registerLive(id string, lr *liveRun) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.live) >= s.cfg.MaxLive {
		return false
	}
	s.live[id] = lr
	return true
}

// takeLive removes and returns the live execution of invocation id, if one waits.
func (s *Engine) takeLive(id string) *liveRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	lr := s.live[id]
	delete(s.live, id)
	return lr
}

// DropLive ends the wait of invocation id's live execution, if one waits (cancel, a failed
// suspension): it ends without writing anything.
func (s *Engine) DropLive(id string) {
	if lr := s.takeLive(id); lr != nil {
		close(lr.drop)
	}
}

// awaitHandover waits for the next Claim of invocation id. It gives up after LiveWait, on drop and
// on Close — unless a Claim took the execution first, whose handover it then receives.
func (s *Engine) awaitHandover(lr *liveRun, id string) (Claim, bool) {
	t := time.NewTimer(s.cfg.LiveWait)
	defer t.Stop()
	select {
	case next := <-lr.handover:
		return next, true
	case <-lr.drop:
		return Claim{}, false
	case <-t.C:
	case <-s.closing:
	}
	s.mu.Lock()
	if s.live[id] == lr {
		delete(s.live, id)
		s.mu.Unlock()
		return Claim{}, false
	}
	s.mu.Unlock()
	select { // a Claim took it: its handover is on the way
	case next := <-lr.handover:
		return next, true
	case <-lr.drop:
		return Claim{}, false
	}
}

// resolutionAfter finds how the wait p ended, from the log events after afterSeq (the suspension):
// a journal_resolved for its entry (an event, a child's outcome), or, at its time, a due timer or
// an expired event wait (resolved here, recorded with the next write). Not resolved (the workflow
// was resumed before its time): the execution parks again.
func (s *Engine) resolutionAfter(ctx context.Context, h *host.Host, p *sandbox.Park, afterSeq int64, now time.Time) (sandbox.Resolution, bool) {
	rec, _ := h.Written()
	evs, err := s.cfg.Store.Events(ctx, store.EventLogQuery{TenantID: rec.TenantID, InvocationID: rec.ID, AfterSeq: afterSeq, Limit: 0})
	if err != nil {
		return sandbox.Resolution{}, false
	}
	for _, ev := range evs {
		if ev.Type != invocation.EventJournalResolved {
			continue
		}
		if r, err := invocation.DecodeData[invocation.JournalResolved](ev); err == nil && r.Seq == p.Seq {
			return sandbox.Resolution{Result: r.Result, Now: now}, true
		}
	}
	j := sandbox.JournalEntry{Seq: p.Seq, Until: p.Until}
	switch p.Kind {
	case "timer", "retry":
		j.Helper = "r_sleep"
	case "event":
		j.Helper = "r_wait_event_v1"
		if p.TimeoutAt != nil {
			j.Until = *p.TimeoutAt
		}
	}
	if resolveDue(h, &j, now) {
		return sandbox.Resolution{Result: j.Result, Now: now}, true
	}
	return sandbox.Resolution{}, false
}
