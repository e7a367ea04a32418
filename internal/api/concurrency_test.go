package api_test

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// parallel runs n copies of f at once and returns the statuses they answered.
func parallel(t *testing.T, n int, f func(i int) *resp) map[int]int {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	counts := map[int]int{}
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := f(i)
			mu.Lock()
			counts[r.Status]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return counts
}

// TestConcurrency covers races between requests: duplicate registrations, the definitions quota and
// status changes must each be decided exactly once.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	const n = 12

	// Requests run in goroutines, where FailNow must not be called: they report through a recorder,
	// whose FailNow marks the test failed and ends only that goroutine.
	call := func(method, path string, body any) *resp {
		rec := &recorder{TB: t}
		return e.do(rec, method, path, adm, body)
	}

	t.Run("same id registered at once: one 201, the rest 409", func(t *testing.T) {
		got := parallel(t, n, func(int) *resp {
			return call(http.MethodPost, base+"/entrypoints", fnNamed(t, "race.same.v1~"))
		})
		require.Equal(t, map[int]int{http.StatusCreated: 1, http.StatusConflict: n - 1}, got)
	})

	t.Run("max_definitions holds under concurrent registrations", func(t *testing.T) {
		e.enable(t, "quota", obj{"quotas": obj{"max_definitions": 3}})
		tok := e.token(t, "quota", "admin", "admin")
		got := parallel(t, n, func(i int) *resp {
			rec := &recorder{TB: t}
			return e.do(rec, http.MethodPost, base+"/entrypoints", tok, fnNamed(t, fmt.Sprintf("race.q%d.v1~", i)))
		})
		require.Equal(t, map[int]int{http.StatusCreated: 3, http.StatusTooManyRequests: n - 3}, got)
		r := e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints?limit=200", tok, nil)
		require.Len(t, r.items(), 3)
	})

	t.Run("concurrent activations: one 200, the rest 409", func(t *testing.T) {
		ep := e.register(t, adm, fnNamed(t, "race.activate.v1~"))
		got := parallel(t, n, func(int) *resp {
			return call(http.MethodPost, epPath(idOf(ep))+":status", obj{"action": "activate"})
		})
		require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusConflict: n - 1}, got)
		r := e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?"+query("$filter", "resource_id eq '"+idOf(ep)+"'").Encode(), adm, nil)
		require.Len(t, r.items(), 2, "one created and one activated event: %s", r)
	})
}

// recorder is a testing.TB whose FailNow records the failure and exits the goroutine, so helpers
// can run off the test goroutine.
type recorder struct {
	testing.TB
}

func (r *recorder) FailNow() {
	r.Fail()
	runtime.Goexit()
}
