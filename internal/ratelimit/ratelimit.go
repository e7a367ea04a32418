// Package ratelimit is 000's RateLimiter plugin model: each plugin handles one strategy GTS type
// (traits.rate_limit.strategy of an entrypoint) and decides, per key, whether a request may pass.
// The registry maps strategies to plugins; TokenBucket is the system default
// (gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.token_bucket.v1~), an
// in-process limiter. Keys are chosen by the caller (Lark uses tenant and entrypoint), so limits
// are isolated across tenants.
package ratelimit

import (
	"encoding/json"
	"sort"
	"time"
)

// Plugin is a RateLimiter (000): it handles exactly one strategy GTS type and receives the
// entrypoint's rate_limit.config as opaque JSON (validated at registration against the strategy's
// config schema).
type Plugin interface {
	// Strategy is the strategy GTS type id the plugin handles.
	Strategy() string
	// Allow takes one request for key under config at now. A refused request takes nothing.
	Allow(key string, config json.RawMessage, now time.Time) Decision
}

// Decision is the outcome of Plugin.Allow.
type Decision struct {
	// Allowed reports whether the request may pass.
	Allowed bool
	// RetryAfter, when refused, is how long until a request could pass.
	RetryAfter time.Duration
	// release gives an allowed request's permit back (see Release).
	release func()
}

// Release gives back the permit of an allowed request that was not carried out after all (an
// Idempotency-Key replay, say). It does nothing for a refused request.
func (d Decision) Release() {
	if d.release != nil {
		d.release()
	}
}

// Registry maps strategy GTS types to plugins.
type Registry struct {
	plugins map[string]Plugin
}

// NewRegistry returns a registry of plugins; a later plugin for the same strategy replaces an
// earlier one.
func NewRegistry(plugins ...Plugin) *Registry {
	r := &Registry{plugins: map[string]Plugin{}}
	for _, p := range plugins {
		r.plugins[p.Strategy()] = p
	}
	return r
}

// Default returns the registry of the system-provided plugins: the token bucket.
func Default() *Registry { return NewRegistry(NewTokenBucket()) }

// Lookup returns the plugin of strategy.
func (r *Registry) Lookup(strategy string) (Plugin, bool) {
	p, ok := r.plugins[strategy]
	return p, ok
}

// Strategies returns the strategies the registry handles, sorted.
func (r *Registry) Strategies() []string {
	out := make([]string, 0, len(r.plugins))
	for s := range r.plugins {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
