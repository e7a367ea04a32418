package fairness_test

import (
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/fairness"
)

// queue is an in-memory Queue: per-tenant backlogs, weights and caps on what a tenant may take.
type queue struct {
	backlog map[string]int
	weight  map[string]float64
	cap     map[string]int // running-slot headroom per tenant (absent: unlimited)
	order   []string       // every Take, one entry per item
	calls   int            // Tenants calls
}

func (q *queue) Tenants(after string, n int) ([]string, error) {
	q.calls++
	var ids []string
	for t, b := range q.backlog {
		if b > 0 && t > after {
			ids = append(ids, t)
		}
	}
	sort.Strings(ids)
	if len(ids) > n {
		ids = ids[:n]
	}
	return ids, nil
}

func (q *queue) Weight(t string) float64 {
	if w, ok := q.weight[t]; ok {
		return w
	}
	return 1
}

func (q *queue) Take(t string, n int) (int, error) {
	got := min(n, q.backlog[t])
	if c, ok := q.cap[t]; ok {
		got = min(got, c)
		q.cap[t] = c - got
	}
	q.backlog[t] -= got
	for range got {
		q.order = append(q.order, t)
	}
	return got, nil
}

func count(order []string) map[string]int {
	m := map[string]int{}
	for _, t := range order {
		m[t]++
	}
	return m
}

func TestEqualWeightsAlternate(t *testing.T) {
	q := &queue{backlog: map[string]int{"flood": 100000, "small": 5}}
	s := fairness.New()
	for range 10 {
		n, err := s.Claim(q, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	require.Equal(t, []string{"flood", "small", "flood", "small", "flood", "small", "flood", "small", "flood", "small"}, q.order,
		"one claim at a time, the two tenants alternate")
	n, err := s.Claim(q, 8)
	require.NoError(t, err)
	require.Equal(t, 8, n, "small is empty now: flood takes every slot")
	require.Equal(t, 100000-5-8, q.backlog["flood"])
}

func TestNewArrivalWaitsAtMostOneTurn(t *testing.T) {
	// A tenant whose work arrives while another floods is served in the very next claim, whatever the
	// claim size and wherever the cursor is.
	for _, limit := range []int{1, 2, 7, 64} {
		q := &queue{backlog: map[string]int{"a-flood": 1 << 30}}
		s := fairness.New()
		for i := range 200 {
			_, err := s.Claim(q, limit)
			require.NoError(t, err)
			if i%3 == 0 {
				q.backlog["b-late"]++
				q.order = nil
				n, err := s.Claim(q, limit)
				require.NoError(t, err)
				require.Equal(t, limit, n)
				require.Contains(t, q.order, "b-late", "limit %d, claim %d: the new tenant's item is claimed at once", limit, i)
				require.LessOrEqual(t, indexOf(q.order, "b-late"), 1, "at most one of the flood's items goes first")
			}
		}
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func TestWeightsShareClaims(t *testing.T) {
	q := &queue{backlog: map[string]int{"gold": 1 << 30, "std": 1 << 30, "low": 1 << 30},
		weight: map[string]float64{"gold": 3, "std": 1, "low": 0.5}}
	s := fairness.New()
	for range 900 {
		_, err := s.Claim(q, 4)
		require.NoError(t, err)
	}
	c := count(q.order)
	total := float64(len(q.order))
	require.Equal(t, 3600, len(q.order))
	require.InDelta(t, 3.0/4.5, float64(c["gold"])/total, 0.01, "%v", c)
	require.InDelta(t, 1.0/4.5, float64(c["std"])/total, 0.01, "%v", c)
	require.InDelta(t, 0.5/4.5, float64(c["low"])/total, 0.01, "%v", c)
}

func TestHeldBackTenantDoesNotBlockOthers(t *testing.T) {
	q := &queue{backlog: map[string]int{"capped": 1000, "free": 1000}, cap: map[string]int{"capped": 2}}
	s := fairness.New()
	n, err := s.Claim(q, 10)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	require.Equal(t, map[string]int{"capped": 2, "free": 8}, count(q.order), "capped takes its 2 slots, free the rest")

	// Nothing may run: the claim ends without spinning.
	q = &queue{backlog: map[string]int{"capped": 1000}, cap: map[string]int{"capped": 0}}
	n, err = fairness.New().Claim(q, 10)
	require.NoError(t, err)
	require.Zero(t, n)
	require.LessOrEqual(t, q.calls, 3)
}

func TestManyTenantsRoundRobin(t *testing.T) {
	q := &queue{backlog: map[string]int{}}
	for i := range 1000 {
		q.backlog[fmt.Sprintf("t%04d", i)] = 1 << 20
	}
	s := fairness.New()
	for range 50 {
		n, err := s.Claim(q, 64)
		require.NoError(t, err)
		require.Equal(t, 64, n)
	}
	c := count(q.order)
	require.Len(t, c, 1000, "3,200 claims over 1,000 tenants reach every tenant")
	for tenant, n := range c {
		require.True(t, n == 3 || n == 4, "%s took %d", tenant, n)
	}
}

func TestLightWeightAlone(t *testing.T) {
	q := &queue{backlog: map[string]int{"low": 10}, weight: map[string]float64{"low": 0.1}}
	n, err := fairness.New().Claim(q, 4)
	require.NoError(t, err)
	require.Equal(t, 4, n, "a light tenant alone still gets every slot")
}

type failing struct{ queue }

func (f *failing) Take(string, int) (int, error) { return 0, errors.New("disk on fire") }

func TestErrorsPropagate(t *testing.T) {
	f := &failing{queue{backlog: map[string]int{"a": 1}}}
	_, err := fairness.New().Claim(f, 1)
	require.EqualError(t, err, "disk on fire")
}
