// Package fairness decides whose work the dispatcher claims next: deficit round-robin over tenants
// (004 §5.1) with per-tenant weights. Tenants with due work are visited in a ring (tenant id order,
// continuing where the previous claim stopped); each visit adds the tenant's weight to its deficit
// and lets it take as many items as its whole deficit allows. A tenant whose queue runs dry, or
// whose concurrency limits hold its work back, loses its deficit, so nobody banks credit while idle.
// Over any stretch where tenants stay backlogged, each one's share of claims is proportional to its
// weight, and a tenant with a deep backlog delays another tenant's next item by at most one visit.
package fairness

import (
	"math"
	"sync"
)

// Queue is the dispatcher's view of the queued work during one claim.
type Queue interface {
	// Tenants lists up to n tenants with due work after the tenant id after ("" = from the first),
	// in id order.
	Tenants(after string, n int) ([]string, error)
	// Weight is a tenant's fairness weight (> 0).
	Weight(tenantID string) float64
	// Take claims up to n of a tenant's due items and reports how many it claimed. Fewer than n
	// means the tenant has nothing more it may run now (its queue is empty or its limits are
	// reached): it is not offered more during this claim.
	Take(tenantID string, n int) (int, error)
}

// MinWeight is the smallest weight Claim honours; smaller weights count as MinWeight. It bounds
// how many passes over the ring a claim may make before a light tenant's deficit reaches one item.
const MinWeight = 0.1

// maxPasses bounds the ring walks of one claim that take nothing: enough for a MinWeight tenant to
// earn one item.
var maxPasses = int(math.Ceil(1/MinWeight)) + 1

// DRR is the deficit round-robin over tenants: it keeps the ring's cursor and each tenant's deficit
// between claims. Its methods are safe for concurrent use; claims are serialized.
type DRR struct {
	mu      sync.Mutex
	deficit map[string]float64
	// cursor is the tenant visited last; open is set when its turn was cut short by the claim limit
	// (it had deficit left), so the next claim resumes that turn without a new quantum.
	cursor string
	open   bool
}

// New returns a DRR with no deficits, starting at the first tenant.
func New() *DRR { return &DRR{deficit: map[string]float64{}} }

// ringPage is how many tenants one Tenants call fetches.
const ringPage = 64

// Claim takes up to limit items from q, tenant by tenant in deficit round-robin order, and returns how
// many it took. It returns fewer than limit only when no tenant may take more.
func (s *DRR) Claim(q Queue, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := claim{s: s, q: q, limit: limit, done: map[string]bool{}}
	if s.open && s.cursor != "" {
		// The previous claim ended in the middle of this tenant's turn: finish the turn first.
		s.open = false
		if err := c.visit(s.cursor, false, false); err != nil {
			return c.taken, err
		}
	}
	r := ring{q: q, start: s.cursor}
	idlePasses, idle := 0, true
	for c.taken < limit {
		t, wrapped, err := r.next()
		if err != nil {
			return c.taken, err
		}
		if wrapped {
			// A pass that took nothing ends the claim, unless some tenant is only short of a whole
			// item of deficit (a weight below 1): going round again adds its quantum.
			if idle {
				idlePasses++
				if idlePasses > maxPasses || !c.fractional(r.seen) {
					break
				}
			}
			idle = true
		}
		if t == "" {
			break // no tenant has due work
		}
		if c.done[t] {
			if r.replaying() && len(c.done) >= len(r.seen) {
				break
			}
			continue
		}
		before := c.taken
		// When everyone else is served or held back, the last tenant standing may fill the claim.
		fill := r.replaying() && len(c.done) == len(r.seen)-1
		if err := c.visit(t, true, fill); err != nil {
			return c.taken, err
		}
		if c.taken > before {
			idle = false
		}
	}
	return c.taken, nil
}

// claim is the state of one Claim call.
type claim struct {
	s     *DRR
	q     Queue
	limit int
	taken int
	done  map[string]bool // tenants that may take nothing more in this call
}

// visit gives t its turn: a new quantum (its weight) when quantum is set, then as many items as its
// whole deficit allows, or, with fill, whatever the claim has room for (no credit carries over).
func (c *claim) visit(t string, quantum, fill bool) error {
	s := c.s
	if quantum {
		s.deficit[t] += max(c.q.Weight(t), MinWeight)
	}
	s.cursor = t
	want := min(int(s.deficit[t]), c.limit-c.taken)
	if fill {
		want = c.limit - c.taken
		s.deficit[t] = float64(want)
	}
	got := 0
	if want > 0 {
		var err error
		if got, err = c.q.Take(t, want); err != nil {
			return err
		}
	}
	c.taken += got
	s.deficit[t] -= float64(got)
	switch {
	case got < want:
		c.done[t] = true
		delete(s.deficit, t) // empty or held back: no credit is banked
	case fill:
		delete(s.deficit, t)
	case c.taken == c.limit && s.deficit[t] >= 1:
		s.open = true // the claim is full; the turn goes on in the next claim
	case s.deficit[t] == 0:
		delete(s.deficit, t)
	}
	return nil
}

// fractional reports whether some tenant met in this claim is still offered work but holds less
// than one item of deficit: another pass adds its quantum and may let it take one.
func (c *claim) fractional(seen []string) bool {
	for _, t := range seen {
		if !c.done[t] && c.s.deficit[t] < 1 {
			return true
		}
	}
	return false
}

// ring walks the tenants with due work in id order, starting after a tenant and wrapping around to
// it, fetching them page by page the first time round and replaying what it met afterwards.
type ring struct {
	q     Queue
	start string
	// phase 0 fetches the ids after start, phase 1 the ids from the first up to start; phase 2
	// replays seen.
	phase     int
	from      string
	exhausted bool
	buf       []string
	seen      []string
	pos       int
}

// replaying reports whether every tenant with due work has been met.
func (r *ring) replaying() bool { return r.phase == 2 }

// next returns the next tenant ("" when none has due work) and whether a pass over the ring just
// ended.
func (r *ring) next() (string, bool, error) {
	for r.phase < 2 {
		if len(r.buf) > 0 {
			t := r.buf[0]
			r.buf = r.buf[1:]
			r.seen = append(r.seen, t)
			return t, false, nil
		}
		if r.exhausted {
			r.phase, r.exhausted, r.from = r.phase+1, false, ""
			if r.phase == 1 && r.start == "" {
				r.phase = 2 // phase 0 already walked from the first tenant
			}
			continue
		}
		after := r.from
		if r.phase == 0 && after == "" {
			after = r.start
		}
		ids, err := r.q.Tenants(after, ringPage)
		if err != nil {
			return "", false, err
		}
		r.exhausted = len(ids) < ringPage
		if len(ids) > 0 {
			r.from = ids[len(ids)-1]
		}
		if r.phase == 1 {
			for i, id := range ids {
				if id > r.start {
					ids, r.exhausted = ids[:i], true
					break
				}
			}
		}
		r.buf = ids
	}
	if len(r.seen) == 0 {
		return "", true, nil
	}
	if r.pos >= len(r.seen) {
		r.pos = 0
	}
	wrapped := r.pos == 0
	t := r.seen[r.pos]
	r.pos++
	return t, wrapped, nil
}
