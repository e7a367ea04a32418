// Package admission decides when a Starlark execution may start, so that a busy process runs only
// the work it can run well and the rest waits, queued, with no clock running against it.
//
// An execution is admitted (Gate.Enter) before it interprets its first step, and its timeout and
// CPU budget start then, not when it was claimed or requested. Two things bound admission:
//
//   - Runnable executions per tenant: an admitted execution counts while it can use the CPU
//     (holding or waiting for a cpushare slot) and not while it waits on the host (an HTTP answer,
//     a child, a journal write: Ticket.Block). A tenant whose executions are CPU-bound therefore
//     runs a few at a time, each at a useful share of a core, instead of dozens that all crawl
//     toward their timeouts; I/O-bound executions do not hold the bound.
//   - Memory: an execution reserves memory as its accounted allocations grow (Ticket.Grow, called
//     by the sandbox at its CPU quanta), against a budget for the process and a share per tenant.
//     An execution that would pass them waits at that point for others to end, holding no CPU;
//     the tenant's oldest execution always proceeds (up to its own memory_mb), so the wait ends.
//
// Waiting executions are admitted in fair order: first come first served within a tenant, round
// robin between tenants. The claim stage asks Room how many more attempts of a tenant to claim,
// so a backlog stays in the store's queue (visible as queued) instead of waiting in this process
// with a lease.
package admission

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is returned by Enter on a gate that has been closed.
var ErrClosed = errors.New("admission: gate closed")

// Options configure a Gate. The zero value admits everything at once.
type Options struct {
	// Runnable bounds each tenant's runnable executions (0: no bound).
	Runnable int
	// Memory bounds the memory all admitted executions reserve, in bytes (0: no bound).
	Memory int64
	// TenantMemory bounds one tenant's share of Memory, in bytes (0: Memory).
	TenantMemory int64
	// Initial is what an execution reserves when it is admitted, in bytes (default 4 MiB, at most
	// the execution's own limit).
	Initial int64
	// OnRoom is called (without the gate's lock) when a tenant whose claims Room held back has
	// room again: the dispatcher's Wake. It must not block.
	OnRoom func()
	// OnReserved is called (under the gate's lock: it must be cheap) after each change with the
	// bytes the admitted executions reserve beyond their Initial reservations: the memory of
	// executions that grew (memlimit.Tracker follows it). Small executions' initial reservations
	// are left out: what they hold is small, and many of them at once are ordinary load.
	OnReserved func(grown int64)
}

// DefaultInitial is Options.Initial's default.
const DefaultInitial = 4 << 20

// Gate admits executions. A nil *Gate admits everything at once.
type Gate struct {
	mu       sync.Mutex
	o        Options
	tenants  map[string]*tenantState
	ring     []string  // tenants with waiting executions, in round-robin order
	reserved int64     // bytes reserved by all admitted executions
	grown    int64     // of which beyond their initial reservations
	seq      uint64    // admission order (the oldest execution of a tenant may always grow)
	heldBack bool      // Room refused a tenant since the last OnRoom
	growers  []*Ticket // admitted executions waiting for memory, oldest request first
}

// tenantState is one tenant's admitted and waiting executions.
type tenantState struct {
	runnable int
	admitted map[*Ticket]struct{}
	reserved int64
	queue    []*Ticket // waiting to be admitted, first come first served
	growing  int       // admitted executions waiting for memory
	// rate counts admissions in the current and the previous second (Room's estimate of how many
	// executions the tenant starts in a second).
	rateAt time.Time
	rate   [2]int
}

// New returns a Gate.
func New(o Options) *Gate {
	if o.Initial <= 0 {
		o.Initial = DefaultInitial
	}
	if o.Memory > 0 && (o.TenantMemory <= 0 || o.TenantMemory > o.Memory) {
		o.TenantMemory = o.Memory
	}
	return &Gate{o: o, tenants: map[string]*tenantState{}}
}

// Ticket is one admitted (or waiting) execution. Its methods are called by the execution's own
// goroutine.
type Ticket struct {
	g        *Gate
	tenant   string
	limit    int64 // the execution's own memory limit (its reservation never passes it)
	want     int64 // the reservation asked for while waiting
	initial  int64 // the reservation it was admitted with
	reserved int64
	seq      uint64
	blocked  bool
	left     bool
	ready    chan struct{}
	enqueued time.Time
	waited   time.Duration
}

// Waited is how long the execution waited to be admitted.
func (t *Ticket) Waited() time.Duration {
	if t == nil {
		return 0
	}
	return t.waited
}

// Enter waits until an execution of tenant whose memory limit is limit bytes may start, or ctx
// ends (its error is returned and nothing is held); inside an admitted execution (Inside) it
// admits at once. The returned ticket must be given back with Leave.
func (g *Gate) Enter(ctx context.Context, tenant string, limit int64) (*Ticket, error) {
	if g == nil {
		return nil, nil
	}
	t := &Ticket{g: g, tenant: tenant, limit: limit, want: min(g.o.Initial, max(limit, 1)), enqueued: time.Now()}
	g.mu.Lock()
	ts := g.tenant(tenant)
	if inside(ctx) || (len(ts.queue) == 0 && g.fits(ts, t)) {
		g.admit(ts, t)
		g.mu.Unlock()
		return t, nil
	}
	t.ready = make(chan struct{})
	if len(ts.queue) == 0 {
		g.ring = append(g.ring, tenant)
	}
	ts.queue = append(ts.queue, t)
	g.mu.Unlock()
	select {
	case <-t.ready:
		t.waited = time.Since(t.enqueued)
		return t, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !g.dequeue(ts, t) { // admitted as ctx ended: give it back
		g.release(ts, t)
		g.admitWaiting()
	}
	g.mu.Unlock()
	return nil, ctx.Err()
}

// tenant returns a tenant's state, created on first use. g.mu is held.
func (g *Gate) tenant(id string) *tenantState {
	ts := g.tenants[id]
	if ts == nil {
		ts = &tenantState{admitted: map[*Ticket]struct{}{}}
		g.tenants[id] = ts
	}
	return ts
}

// fits reports whether t may be admitted now. g.mu is held.
func (g *Gate) fits(ts *tenantState, t *Ticket) bool {
	if g.o.Runnable > 0 && ts.runnable >= g.o.Runnable {
		return false
	}
	return g.memoryFits(ts, t, t.want)
}

// memoryFits reports whether t may reserve n more bytes. Past a budget, the oldest admitted
// execution of the tenant (for the tenant's share) or of the process (for the process budget)
// still may: it was admitted first, and its growth is what lets the others' waits end. g.mu is held.
func (g *Gate) memoryFits(ts *tenantState, t *Ticket, n int64) bool {
	if g.o.Memory <= 0 {
		return true
	}
	if ts.reserved+n > g.o.TenantMemory && !oldestOf(ts, t) {
		return false
	}
	if g.reserved+n <= g.o.Memory {
		return true
	}
	for _, o := range g.tenants {
		if !oldestOf(o, t) {
			return false
		}
	}
	return true
}

// oldestOf reports whether no execution of ts was admitted before t (an execution not admitted
// yet is the newest). g.mu is held.
func oldestOf(ts *tenantState, t *Ticket) bool {
	for o := range ts.admitted {
		if o != t && (t.seq == 0 || o.seq < t.seq) {
			return false
		}
	}
	return true
}

// admit makes t admitted. g.mu is held.
func (g *Gate) admit(ts *tenantState, t *Ticket) {
	g.seq++
	t.seq = g.seq
	defer func() {
		if g.seq%4096 == 0 {
			g.sweep() // after t is counted: its own tenant stays
		}
	}()
	ts.runnable++
	ts.admitted[t] = struct{}{}
	t.reserved = t.want
	t.initial = t.want
	g.reserve(ts, t.want, 0)
	now := time.Now()
	switch s := now.Sub(ts.rateAt); {
	case s >= 2*time.Second:
		ts.rate, ts.rateAt = [2]int{}, now
	case s >= time.Second:
		ts.rate, ts.rateAt = [2]int{ts.rate[0], 0}, ts.rateAt.Add(time.Second)
	}
	ts.rate[1]++
}

// reserve adds n bytes (negative: gives them back), grown of them beyond initial reservations, to
// a tenant's and the gate's reservations. g.mu is held.
func (g *Gate) reserve(ts *tenantState, n, grown int64) {
	ts.reserved += n
	g.reserved += n
	g.grown += grown
	if g.o.OnReserved != nil && grown != 0 {
		g.o.OnReserved(g.grown)
	}
}

// dequeue removes a waiting ticket; false if it is not waiting (it was admitted). g.mu is held.
func (g *Gate) dequeue(ts *tenantState, t *Ticket) bool {
	for i, w := range ts.queue {
		if w == t {
			ts.queue = append(ts.queue[:i:i], ts.queue[i+1:]...)
			if len(ts.queue) == 0 {
				g.dropFromRing(t.tenant)
			}
			return true
		}
	}
	return false
}

// dropFromRing removes a tenant from the round-robin ring. g.mu is held.
func (g *Gate) dropFromRing(tenant string) {
	for i, id := range g.ring {
		if id == tenant {
			g.ring = append(g.ring[:i:i], g.ring[i+1:]...)
			return
		}
	}
}

// admitWaiting admits waiting executions in round-robin order between tenants while they fit, and
// grants waiting memory growth first. g.mu is held.
func (g *Gate) admitWaiting() {
	g.grantGrowth()
	for progress := true; progress && len(g.ring) > 0; {
		progress = false
		for i := 0; i < len(g.ring); {
			ts := g.tenants[g.ring[i]]
			t := ts.queue[0]
			if !g.fits(ts, t) {
				i++
				continue
			}
			ts.queue = ts.queue[1:]
			g.admit(ts, t)
			close(t.ready)
			progress = true
			id := g.ring[i]
			g.ring = append(g.ring[:i:i], g.ring[i+1:]...)
			if len(ts.queue) > 0 {
				g.ring = append(g.ring, id) // its next one waits for the other tenants' turn
			}
		}
	}
}

// sweep forgets the tenants with nothing admitted or waiting whose admission rate is stale, so
// that the gate's memory follows the tenants active in the last seconds. g.mu is held.
func (g *Gate) sweep() {
	for id, ts := range g.tenants {
		if len(ts.admitted) == 0 && len(ts.queue) == 0 && ts.growing == 0 && time.Since(ts.rateAt) > 2*time.Second {
			delete(g.tenants, id)
		}
	}
}

// release gives back what an admitted ticket holds. g.mu is held.
func (g *Gate) release(ts *tenantState, t *Ticket) {
	if !t.blocked {
		ts.runnable--
	}
	delete(ts.admitted, t)
	g.reserve(ts, -t.reserved, -(t.reserved - t.initial))
	t.reserved = 0
	if len(ts.admitted) == 0 && len(ts.queue) == 0 && ts.growing == 0 && time.Since(ts.rateAt) > 2*time.Second {
		delete(g.tenants, t.tenant)
	}
}

// Leave gives the ticket's place and memory back and admits the next waiting executions. Later
// calls do nothing.
func (t *Ticket) Leave() {
	if t == nil {
		return
	}
	g := t.g
	g.mu.Lock()
	if t.left {
		g.mu.Unlock()
		return
	}
	t.left = true
	g.release(g.tenant(t.tenant), t)
	g.admitWaiting()
	wake := g.heldBack && g.o.OnRoom != nil
	g.heldBack = false
	g.mu.Unlock()
	if wake {
		g.o.OnRoom()
	}
}

// Block says the execution waits on the host: it stops counting as runnable, and another may be
// admitted in its place. An execution that has not grown gives its initial reservation back
// while it waits (what it holds is small), so that executions waiting on I/O, or live workflows
// parked on a timer, never fill their tenant's memory share.
func (t *Ticket) Block() {
	if t == nil || t.blocked {
		return
	}
	g := t.g
	g.mu.Lock()
	t.blocked = true
	ts := g.tenant(t.tenant)
	ts.runnable--
	if t.reserved == t.initial {
		g.reserve(ts, -t.initial, 0)
		t.reserved = 0
	}
	g.admitWaiting()
	g.mu.Unlock()
}

// Unblock says the execution can use the CPU again. It never waits: the execution was admitted
// already (its initial reservation, if it gave it back, is taken again even past a budget), and
// the CPU scheduler shares the slots.
func (t *Ticket) Unblock() {
	if t == nil || !t.blocked {
		return
	}
	g := t.g
	g.mu.Lock()
	t.blocked = false
	ts := g.tenant(t.tenant)
	ts.runnable++
	if t.reserved == 0 {
		g.reserve(ts, t.initial, 0)
		t.reserved = t.initial
	}
	g.mu.Unlock()
}

// growStep rounds small reservations up, so that an execution growing steadily asks the gate
// again only every few MiB.
const growStep = 4 << 20

// BigAt is the accounted allocation past which an execution reserves its whole memory limit at
// once: what it may use, as admission counts it. A big execution then asks the gate once, and
// Go's soft memory limit (memlimit.Tracker) moves once, instead of at every few MiB (each move
// of a tight limit is a collection).
const BigAt = 16 << 20

// Grow reserves memory for an execution whose accounted allocations reached total bytes. It
// returns at once when the reservation covers total, or more fits; otherwise it waits until
// memory is given back or ctx ends (its error is returned). The caller holds no CPU slot while it
// waits (TryGrow first, then Grow under the sandbox's blocking).
func (t *Ticket) Grow(ctx context.Context, total int64) error {
	if t == nil {
		return nil
	}
	g := t.g
	g.mu.Lock()
	if g.tryGrow(t, total) {
		g.mu.Unlock()
		return nil
	}
	ts := g.tenant(t.tenant)
	t.ready = make(chan struct{})
	t.want = t.grown(total)
	ts.growing++
	g.growers = append(g.growers, t)
	g.mu.Unlock()
	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, w := range g.growers {
		if w == t {
			g.growers = append(g.growers[:i:i], g.growers[i+1:]...)
			ts.growing--
			return ctx.Err()
		}
	}
	return nil // granted as ctx ended: the memory is reserved, Leave gives it back
}

// TryGrow is Grow without waiting: false if the memory does not fit now.
func (t *Ticket) TryGrow(total int64) bool {
	if t == nil || total <= t.reserved {
		return true
	}
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	return t.g.tryGrow(t, total)
}

// grown is the reservation an execution at total bytes asks for: total rounded up to growStep,
// or past BigAt its whole limit.
func (t *Ticket) grown(total int64) int64 {
	n := (total + growStep - 1) / growStep * growStep
	if total > BigAt {
		n = t.limit
	}
	return max(min(n, t.limit), total)
}

// tryGrow grows t's reservation to cover total if it fits (or t is its tenant's oldest
// execution). g.mu is held.
func (g *Gate) tryGrow(t *Ticket, total int64) bool {
	if total <= t.reserved {
		return true
	}
	ts := g.tenant(t.tenant)
	want := t.grown(total)
	if !g.memoryFits(ts, t, want-t.reserved) {
		return false
	}
	g.reserve(ts, want-t.reserved, want-t.reserved)
	t.reserved = want
	return true
}

// grantGrowth grants the memory growth that fits now, oldest request first. g.mu is held.
func (g *Gate) grantGrowth() {
	for i := 0; i < len(g.growers); {
		t := g.growers[i]
		want := t.want
		if !g.tryGrow(t, want) {
			i++
			continue
		}
		g.growers = append(g.growers[:i:i], g.growers[i+1:]...)
		g.tenant(t.tenant).growing--
		close(t.ready)
	}
}

// Room is how many more attempts of tenant the claim stage should take now, at most max: as many
// as can be admitted at once, and as many more as the tenant starts in about a second (so that
// quick executions are claimed in batches, and CPU-bound ones a few at a time). A tenant waiting
// for memory gets none. When it answers less than max, the gate calls Options.OnRoom once
// something is given back.
func (g *Gate) Room(tenant string, max int) int {
	if g == nil || g.o.Runnable <= 0 {
		return max
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := g.tenants[tenant]
	if ts == nil {
		return min(max, g.o.Runnable)
	}
	room := 0
	if ts.growing == 0 {
		perSecond := ts.rate[0] + ts.rate[1]
		room = g.o.Runnable - ts.runnable + perSecond - len(ts.queue)
	}
	if room < max {
		g.heldBack = true
	}
	return min(max, room) // may be negative: nothing
}

// Stats are a gate's current figures.
type Stats struct {
	// Admitted executions, Waiting to be admitted, and waiting for memory (Growing).
	Admitted, Waiting, Growing int
	// Reserved is the memory the admitted executions reserve, in bytes.
	Reserved int64
}

// Stats returns the gate's current figures.
func (g *Gate) Stats() Stats {
	if g == nil {
		return Stats{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Stats{Reserved: g.reserved, Growing: len(g.growers)}
	for _, ts := range g.tenants {
		s.Admitted += len(ts.admitted)
		s.Waiting += len(ts.queue)
	}
	return s
}

// ctxKey keys the admission state a context carries.
type ctxKey int

const (
	admittedKey ctxKey = iota // *holder: a ticket the caller took for the next execution
	insideKey                 // bool: code running inside an admitted execution
)

// holder hands a ticket to the one execution that takes it.
type holder struct {
	mu sync.Mutex
	t  *Ticket
}

// Admitted returns ctx carrying t, which the caller was admitted with for the execution it is about
// to start (a sync call admitted before its start is written): that execution takes it (Take)
// instead of entering the gate, and leaves it when it ends; the caller leaves it too, in case no
// execution took it (Leave is idempotent).
func Admitted(ctx context.Context, t *Ticket) context.Context {
	return context.WithValue(ctx, admittedKey, &holder{t: t})
}

// Take returns the ticket Admitted put in ctx, once; nil if there is none, or it was taken.
func Take(ctx context.Context) *Ticket {
	h, _ := ctx.Value(admittedKey).(*holder)
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.t
	h.t = nil
	return t
}

// Inside returns ctx marking what runs under it as part of an admitted execution. An execution
// started there (a synchronous child of r_invoke_v1, run while its parent waits) is admitted at
// once: its parent holds a place already, and making it wait behind its own parent could never end.
func Inside(ctx context.Context) context.Context {
	return context.WithValue(ctx, insideKey, true)
}

// inside reports whether ctx is inside an admitted execution.
func inside(ctx context.Context) bool {
	v, _ := ctx.Value(insideKey).(bool)
	return v
}
