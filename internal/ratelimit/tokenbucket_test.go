package ratelimit

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/schema"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func cfg(t *testing.T, rps float64, rpm int64, burst int64) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]any{"max_requests_per_second": rps, "max_requests_per_minute": rpm, "burst_size": burst})
	require.NoError(t, err)
	return b
}

// count takes requests for key at now until one is refused; it returns how many passed and the
// refusal's RetryAfter.
func count(tb *TokenBucket, key string, c json.RawMessage, now time.Time, limit int) (int, time.Duration) {
	for i := 0; i < limit; i++ {
		if d := tb.Allow(key, c, now); !d.Allowed {
			return i, d.RetryAfter
		}
	}
	return limit, 0
}

func TestTokenBucketBurstThenSteadyRate(t *testing.T) {
	tb := NewTokenBucket()
	c := cfg(t, 5, 0, 20)
	n, wait := count(tb, "k", c, t0, 100)
	require.Equal(t, 20, n, "a burst of burst_size passes at once")
	require.Equal(t, 200*time.Millisecond, wait, "then one token every 1/5 s")
	passed := 0
	for ms := 0; ms <= 10_000; ms += 10 { // 10 s of steady demand, a request every 10 ms
		if tb.Allow("k", c, t0.Add(time.Duration(ms)*time.Millisecond)).Allowed {
			passed++
		}
	}
	require.InDelta(t, 50, passed, 1, "the steady rate is max_requests_per_second")
}

func TestTokenBucketPerMinuteCap(t *testing.T) {
	tb := NewTokenBucket()
	c := cfg(t, 10, 30, 10)
	passed := 0
	for ms := 0; ms < 60_000; ms += 100 {
		if tb.Allow("k", c, t0.Add(time.Duration(ms)*time.Millisecond)).Allowed {
			passed++
		}
	}
	require.InDelta(t, 30+29, passed, 1, "30 at once (the per-minute bucket), then 30 a minute — the per-second rate alone would allow 600")
	d := tb.Allow("x", cfg(t, 0, 2, 1), t0)
	require.True(t, d.Allowed)
	require.True(t, tb.Allow("x", cfg(t, 0, 2, 1), t0).Allowed, "burst_size does not apply to the per-minute limit")
	d = tb.Allow("x", cfg(t, 0, 2, 1), t0)
	require.False(t, d.Allowed)
	require.Equal(t, 30*time.Second, d.RetryAfter)
}

func TestTokenBucketKeysAreIndependent(t *testing.T) {
	tb := NewTokenBucket()
	c := cfg(t, 1, 0, 3)
	n, _ := count(tb, "acme/ep", c, t0, 10)
	require.Equal(t, 3, n)
	n, _ = count(tb, "globex/ep", c, t0, 10)
	require.Equal(t, 3, n, "another tenant's key has its own buckets")
}

func TestTokenBucketReleaseAndDisabled(t *testing.T) {
	tb := NewTokenBucket()
	c := cfg(t, 1, 0, 1)
	d := tb.Allow("k", c, t0)
	require.True(t, d.Allowed)
	require.False(t, tb.Allow("k", c, t0).Allowed)
	d.Release()
	require.True(t, tb.Allow("k", c, t0).Allowed, "a released permit can be taken again")
	n, _ := count(tb, "k", cfg(t, 0, 0, 1), t0, 1000)
	require.Equal(t, 1000, n, "both limits 0: no rate limiting")
}

func TestTokenBucketDropsIdleKeys(t *testing.T) {
	tb := NewTokenBucket()
	c := cfg(t, 100, 0, 1)
	for i := 0; i < maxBuckets; i++ {
		tb.Allow(fmt.Sprint(i), c, t0)
	}
	require.Len(t, tb.keys, maxBuckets)
	require.True(t, tb.Allow("new", c, t0.Add(time.Second)).Allowed)
	require.Len(t, tb.keys, 1, "keys whose buckets refilled are dropped when the table is full")
}

func TestRegistry(t *testing.T) {
	r := Default()
	require.Equal(t, []string{TokenBucketStrategy}, r.Strategies())
	p, ok := r.Lookup(TokenBucketStrategy)
	require.True(t, ok)
	require.Equal(t, TokenBucketStrategy, p.Strategy())
	_, ok = r.Lookup("gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.sliding_window.v1~")
	require.False(t, ok)
}

// TestRegistryMatchesSchemas: registration accepts exactly the strategies a plugin handles (the
// schema registry holds their config schemas).
func TestRegistryMatchesSchemas(t *testing.T) {
	schemas, err := schema.New()
	require.NoError(t, err)
	require.Equal(t, Default().Strategies(), schemas.RateLimitStrategies())
	require.Equal(t, schema.TokenBucketStrategy, TokenBucketStrategy)
}
