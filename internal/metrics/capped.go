package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Other is the label value under which a family records what it observes past its label-set cap:
// tenant="__other__", entrypoint="__other__" (tenant ids and GTS ids can never take this value).
const Other = "__other__"

// pair is one label set of a family keyed by tenant and a second label (entrypoint or quota; ""
// for families keyed by tenant alone).
type pair struct{ a, b string }

// capped hands out the children (counters, histograms) of one metric family by label pair. Each
// child is made once and cached, so recording an observation costs a map read under a read lock
// and no allocation. The family holds at most max pairs: an observation for a new pair past that
// goes to the shared (__other__, __other__) child, and the family's labels-dropped counter rises.
type capped[T any] struct {
	max     int
	newT    func(a, b string) T
	dropped prometheus.Counter

	mu       sync.RWMutex
	m        map[pair]T
	other    T
	hasOther bool
}

func newCapped[T any](max int, dropped prometheus.Counter, newT func(a, b string) T) *capped[T] {
	return &capped[T]{max: max, newT: newT, dropped: dropped, m: map[pair]T{}}
}

// get returns the child of (a, b), or the __other__ child when the family is full.
func (c *capped[T]) get(a, b string) T {
	k := pair{a, b}
	c.mu.RLock()
	v, ok := c.m[k]
	full := len(c.m) >= c.max
	other, hasOther := c.other, c.hasOther
	c.mu.RUnlock()
	if ok {
		return v
	}
	if full && hasOther {
		c.dropped.Inc()
		return other
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if len(c.m) < c.max {
		v = c.newT(a, b)
		c.m[k] = v
		return v
	}
	if !c.hasOther {
		c.other, c.hasOther = c.newT(Other, Other), true
	}
	c.dropped.Inc()
	return c.other
}
