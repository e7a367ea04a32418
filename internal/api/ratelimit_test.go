package api_test

// Rate limiting (000, RateLimit): the token bucket plugin over HTTP, on an injected clock.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/ratelimit"
	"github.com/larkrun/lark/internal/server"
)

func TestRateLimits(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk })
	acme := invTenant(t, e, "acme")
	globex := invTenant(t, e, "globex")
	limited := func(config obj) func(obj) {
		return set("traits.rate_limit", obj{"strategy": ratelimit.TokenBucketStrategy, "config": config})
	}
	register := func(name string, config obj) string {
		body := invFn(t, "limits."+name+".v1~", "def main(ctx, input):\n    return {\"n\": 1}\n", limited(config),
			set("traits.is_idempotent", true), set("traits.caching", obj{"max_age_seconds": 600}))
		e.registerActive(t, globex, body)
		return e.registerActive(t, acme, body)["entrypoint_id"].(string)
	}
	perSecond := register("per_second", obj{"max_requests_per_second": 2, "burst_size": 3})
	perMinute := register("per_minute", obj{"max_requests_per_minute": 6, "burst_size": 1})
	cached := register("cached", obj{"max_requests_per_minute": 2})
	start := func(tok, id string, hdr map[string]string, extra ...string) *resp {
		b := obj{"entrypoint_id": id, "mode": "sync", "params": obj{}}
		for _, k := range extra {
			b[k] = true
		}
		return invStart(t, e, tok, b, hdr)
	}
	count := func(tok, id string) (int, *resp) {
		for i := 0; ; i++ {
			if r := start(tok, id, nil); r.Status != http.StatusOK {
				return i, r
			}
		}
	}
	listed := func(tok string) int {
		return len(e.expect(t, http.StatusOK, http.MethodGet, invPath+"?limit=100", tok, nil).items())
	}

	t.Run("burst, then the per-second rate; 429 with Retry-After and no record", func(t *testing.T) {
		n, r := count(acme, perSecond)
		require.Equal(t, 3, n, "burst_size requests pass at once")
		require.Equal(t, http.StatusTooManyRequests, r.Status)
		require.Equal(t, "rate_limited", problemKind(r), "%s", r)
		require.Equal(t, "1", r.Header.Get("Retry-After"), "a token every 0.5 s: retry within a second")
		require.EqualValues(t, 1, r.Body["retry_after_seconds"])
		require.Equal(t, 3, listed(acme), "a refused request creates no invocation")
		clk.Advance(500 * time.Millisecond)
		n, _ = count(acme, perSecond)
		require.Equal(t, 1, n, "one token per 1/2 s")
		clk.Advance(time.Second)
		n, _ = count(acme, perSecond)
		require.Equal(t, 2, n, "two per second")
	})

	t.Run("tenants are isolated", func(t *testing.T) {
		n, _ := count(globex, perSecond)
		require.Equal(t, 3, n, "acme's exhausted bucket does not limit globex")
	})

	t.Run("the per-minute cap, with Retry-After from the per-minute bucket", func(t *testing.T) {
		n, r := count(acme, perMinute)
		require.Equal(t, 6, n, "max_requests_per_minute at once: burst_size applies to the per-second bucket only")
		require.Equal(t, "10", r.Header.Get("Retry-After"), "a token every 60/6 s")
		clk.Advance(9 * time.Second)
		require.Equal(t, http.StatusTooManyRequests, start(acme, perMinute, nil).Status, "not before Retry-After")
		clk.Advance(time.Second)
		n, _ = count(acme, perMinute)
		require.Equal(t, 1, n, "after Retry-After, a request passes")
	})

	t.Run("dry-run and cache hits do not count", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			require.Equal(t, http.StatusOK, start(acme, cached, nil, "dry_run").Status)
		}
		first := start(acme, cached, map[string]string{"Idempotency-Key": "k1"})
		require.Equal(t, http.StatusOK, first.Status, "%s", first)
		for i := 0; i < 5; i++ {
			r := start(acme, cached, map[string]string{"Idempotency-Key": "k1"})
			require.Equal(t, http.StatusOK, r.Status, "%s", r)
			require.Equal(t, true, r.Body["cached"])
		}
		n, _ := count(acme, cached)
		require.Equal(t, 1, n, "of 2 a minute, only k1's first request took one")
	})

	t.Run("registration rejects unknown strategies and invalid configs", func(t *testing.T) {
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", acme,
			invFn(t, "limits.bad1.v1~", "def main(ctx, input):\n    return {}\n",
				set("traits.rate_limit", obj{"strategy": "gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.sliding_window.v1~", "config": obj{}})))
		requireIssue(t, r, "$.traits.rate_limit.strategy", "INVALID_VALUE")
		e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", acme,
			invFn(t, "limits.bad2.v1~", "def main(ctx, input):\n    return {}\n", limited(obj{"max_requests_per_second": -1, "burst_size": 0})))
	})
}
