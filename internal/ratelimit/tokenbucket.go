package ratelimit

import (
	"encoding/json"
	"math"
	"sync"
	"time"
)

// TokenBucketStrategy is the strategy GTS type of the system-default limiter.
const TokenBucketStrategy = "gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.token_bucket.v1~"

// TokenBucketConfig is the token bucket's rate_limit.config (000): per-second and per-minute
// limits enforced independently (a request must pass both); burst_size is the per-second bucket's
// capacity. Zero disables a limit; both zero disables rate limiting.
type TokenBucketConfig struct {
	MaxRequestsPerSecond float64 `json:"max_requests_per_second"`
	MaxRequestsPerMinute int64   `json:"max_requests_per_minute"`
	BurstSize            *int64  `json:"burst_size"`
}

// defaultBurst is burst_size's default (000's schema).
const defaultBurst = 10

// maxBuckets bounds the keys held; beyond it, full (idle) buckets are dropped, which loses nothing:
// a full bucket is the state of a key never seen.
const maxBuckets = 100_000

// TokenBucket is the system-default RateLimiter: two token buckets per key, one refilled at
// max_requests_per_second up to burst_size, one at max_requests_per_minute/60 per second up to
// max_requests_per_minute. State is in process (one node's view, as 000 describes the default
// plugin); a restart starts every key with full buckets.
type TokenBucket struct {
	mu      sync.Mutex
	keys    map[string]*buckets
	configs map[string]TokenBucketConfig // decoded configs by their JSON
}

type bucket struct {
	tokens, capacity, rate float64 // rate in tokens per second; capacity 0 = no limit
}

type buckets struct {
	sec, min bucket
	at       time.Time // when tokens were last brought up to date
}

// NewTokenBucket returns an empty token bucket limiter.
func NewTokenBucket() *TokenBucket {
	return &TokenBucket{keys: map[string]*buckets{}, configs: map[string]TokenBucketConfig{}}
}

// Strategy implements Plugin.
func (*TokenBucket) Strategy() string { return TokenBucketStrategy }

// config decodes (once per distinct JSON) a config; an undecodable one limits nothing (registration
// validated it).
func (t *TokenBucket) config(raw json.RawMessage) TokenBucketConfig {
	if c, ok := t.configs[string(raw)]; ok {
		return c
	}
	var c TokenBucketConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		c = TokenBucketConfig{} // undecodable: limits nothing (registration validated it)
	}
	if len(t.configs) >= 1024 {
		clear(t.configs)
	}
	t.configs[string(raw)] = c
	return c
}

// Allow implements Plugin.
func (t *TokenBucket) Allow(key string, raw json.RawMessage, now time.Time) Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.config(raw)
	if c.MaxRequestsPerSecond <= 0 && c.MaxRequestsPerMinute <= 0 {
		return Decision{Allowed: true}
	}
	burst := float64(defaultBurst)
	if c.BurstSize != nil && *c.BurstSize > 0 {
		burst = float64(*c.BurstSize)
	}
	b, ok := t.keys[key]
	if !ok {
		if len(t.keys) >= maxBuckets {
			t.sweep(now)
		}
		b = &buckets{at: now}
		t.keys[key] = b
		b.sec.tokens, b.min.tokens = math.Inf(1), math.Inf(1)
	}
	// The config may have changed (a new version): capacities and rates follow it.
	b.sec.capacity, b.sec.rate = 0, 0
	if c.MaxRequestsPerSecond > 0 {
		b.sec.capacity, b.sec.rate = burst, c.MaxRequestsPerSecond
	}
	b.min.capacity, b.min.rate = 0, 0
	if c.MaxRequestsPerMinute > 0 {
		b.min.capacity, b.min.rate = float64(c.MaxRequestsPerMinute), float64(c.MaxRequestsPerMinute)/60
	}
	b.refill(now)
	wait := max(b.sec.wait(), b.min.wait())
	if wait > 0 {
		return Decision{RetryAfter: wait}
	}
	b.sec.take(1)
	b.min.take(1)
	return Decision{Allowed: true, release: func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		b.sec.take(-1)
		b.min.take(-1)
	}}
}

// refill brings both buckets up to now.
func (b *buckets) refill(now time.Time) {
	dt := now.Sub(b.at).Seconds()
	if dt < 0 {
		dt = 0
	}
	b.at = now
	b.sec.add(dt)
	b.min.add(dt)
}

func (k *bucket) add(dt float64) {
	if k.capacity == 0 {
		return
	}
	k.tokens = min(k.capacity, k.tokens+dt*k.rate)
}

func (k *bucket) take(n float64) {
	if k.capacity == 0 {
		return
	}
	k.tokens = min(k.capacity, k.tokens-n)
}

// wait is how long until the bucket holds a whole token (0 if it does, or has no limit).
func (k *bucket) wait() time.Duration {
	if k.capacity == 0 || k.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - k.tokens) / k.rate * float64(time.Second))
}

// full reports whether the bucket is as a new one would be.
func (k *bucket) full() bool { return k.capacity == 0 || k.tokens >= k.capacity }

// sweep drops the keys whose buckets are full at now.
func (t *TokenBucket) sweep(now time.Time) {
	for key, b := range t.keys {
		b.refill(now)
		if b.sec.full() && b.min.full() {
			delete(t.keys, key)
		}
	}
}
