package groupcommit

import "context"

// DefaultMaxBatchBytes is the default Options.MaxBatchBytes: 256 KiB of weighed writes per batch.
// A write of several hundred KB (a large params or result) then commits alone, and a small write
// never shares its batch, and so its wait for the commit, with one.
const DefaultMaxBatchBytes = 256 << 10

// unweighed is the weight of a write made with a context that carries none (WithWeight): about
// what a small invocation's row and events take.
const unweighed = 1 << 10

type weightKey struct{}

// weight is what WithWeight attaches to a context.
type weight struct {
	lane  string
	bytes int64
}

// WithWeight returns ctx whose writes are weighed as bytes and queued in lane (a tenant's id): the
// committer takes the waiting writes lane by lane, round robin, and bounds a batch by the sum of
// its writes' weights (Options.MaxBatchBytes). An API request's writes carry its tenant and the
// size of its body; writes without a weight share the lane "" and weigh about 1 KiB.
func WithWeight(ctx context.Context, lane string, bytes int64) context.Context {
	return context.WithValue(ctx, weightKey{}, weight{lane: lane, bytes: max(bytes, 0)})
}

// weightOf is the lane and weight of a write made with ctx.
func weightOf(ctx context.Context) (string, int64) {
	if w, ok := ctx.Value(weightKey{}).(weight); ok {
		return w.lane, max(w.bytes, unweighed)
	}
	return "", unweighed
}

// lanes are the writes the committer has taken off its channel and not yet run: a FIFO queue per
// lane, and the lanes that have writes in round-robin order.
type lanes struct {
	q     map[string][]*op
	order []string // lanes with queued writes; order[next] is served first
	next  int
	n     int
}

func (l *lanes) len() int { return l.n }

func (l *lanes) push(o *op) {
	if l.q == nil {
		l.q = map[string][]*op{}
	}
	if len(l.q[o.lane]) == 0 {
		l.order = append(l.order, o.lane)
	}
	l.q[o.lane] = append(l.q[o.lane], o)
	l.n++
}

// take returns the next batch into batch[:0]: one write per lane in turn, starting with the lane
// after the one the previous batch started with, until maxOps writes or maxBytes of weight. The
// first write is always taken, whatever it weighs; a later one that would pass maxBytes is left
// for a later batch, and so is the rest of its lane (a lane's writes run in the order they came).
func (l *lanes) take(batch []*op, maxOps int, maxBytes int64) []*op {
	batch = batch[:0]
	var bytes int64
	if l.next >= len(l.order) {
		l.next = 0
	}
	start := l.next
	full := map[string]bool{}
	for len(batch) < maxOps && l.n > 0 && len(full) < len(l.order) {
		progressed := false
		for i := 0; i < len(l.order) && len(batch) < maxOps; i++ {
			lane := l.order[(start+i)%len(l.order)]
			q := l.q[lane]
			if full[lane] || len(q) == 0 {
				continue
			}
			if len(batch) > 0 && bytes+q[0].bytes > maxBytes {
				full[lane] = true
				continue
			}
			batch = append(batch, q[0])
			bytes += q[0].bytes
			q[0] = nil
			l.q[lane] = q[1:]
			l.n--
			progressed = true
		}
		if !progressed {
			break
		}
	}
	l.compact(start)
	return batch
}

// compact drops the lanes left empty and moves the round robin on: the next batch starts with the
// first lane after start that still has writes.
func (l *lanes) compact(start int) {
	first := ""
	for i := 1; i <= len(l.order); i++ {
		if lane := l.order[(start+i)%len(l.order)]; len(l.q[lane]) > 0 {
			first = lane
			break
		}
	}
	kept := l.order[:0]
	for _, lane := range l.order {
		if len(l.q[lane]) > 0 {
			kept = append(kept, lane)
		} else {
			delete(l.q, lane)
		}
	}
	clear(l.order[len(kept):])
	l.order = kept
	l.next = 0
	for i, lane := range l.order {
		if lane == first {
			l.next = i
			break
		}
	}
}
