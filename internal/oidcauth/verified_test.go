package oidcauth

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/oidctest"
)

// TestVerifiedTokensAreReused: a token verified once is answered from the cache (its key
// withdrawn meanwhile does not matter) until the key set that verified it expires; then it is
// verified again, and refused. Its exp, its provider's deletion or replacement, and a clock that
// goes back end the reuse too.
func TestVerifiedTokensAreReused(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	iss.SetCacheControl("max-age=120")
	clk := clock.NewFake(time.Now())
	src := &mutableSource{ps: map[string]identity.Provider{}}
	src.ps[iss.URL] = testProvider("idp_1", iss)
	v := New(src, Options{Client: iss.Client(), TenantClient: iss.Client(), Clock: clk, ProviderCacheTTL: time.Second})
	ctx := context.Background()
	good := map[string]any{"tenant": "acme", "groups": "devs"}
	old := iss.Sign(iss.Claims("alice", "lark", good))
	sc, err := v.Authenticate(ctx, old)
	require.NoError(t, err)
	require.Equal(t, "alice", sc.SubjectID)

	// The issuer withdraws the key: the token is still answered from the cache, without a fetch.
	iss.UseKey(iss.AddKey("RSA"))
	iss.RemoveKey(oidctest.KeyIDOf(t, old))
	hits := iss.JWKSHits.Load()
	sc, err = v.Authenticate(ctx, old)
	require.NoError(t, err)
	require.Equal(t, "alice", sc.SubjectID)
	require.Equal(t, hits, iss.JWKSHits.Load(), "a reused token costs no key fetch")
	_, reused := v.recall(ctx, old)
	require.True(t, reused, "answered from the cache")

	// Past the key set's expiry (max-age 120 s), it is verified again with the fresh keys: refused.
	clk.Advance(121 * time.Second)
	_, err = v.Authenticate(ctx, old)
	require.Error(t, err, "the withdrawn key's token is verified again once the key set expired")
	_, reused = v.recall(ctx, old)
	require.False(t, reused)

	// exp ends the reuse.
	short := iss.Claims("bob", "lark", good)
	short["exp"] = clk.Now().Add(30 * time.Second).Unix()
	tok := iss.Sign(short)
	_, err = v.Authenticate(ctx, tok)
	require.NoError(t, err)
	clk.Advance(31*time.Second + identity.DefaultClockSkew*time.Second)
	_, err = v.Authenticate(ctx, tok)
	require.ErrorContains(t, err, "expired")

	// A provider registered again (a new id) verifies afresh; a deleted one refuses.
	tok = iss.Sign(iss.Claims("carol", "lark", good))
	_, err = v.Authenticate(ctx, tok)
	require.NoError(t, err)
	src.mu.Lock()
	src.ps[iss.URL] = testProvider("idp_2", iss)
	src.mu.Unlock()
	clk.Advance(2 * time.Second)
	_, err = v.Authenticate(ctx, tok)
	require.NoError(t, err)
	src.delete(iss.URL)
	clk.Advance(2 * time.Second)
	_, err = v.Authenticate(ctx, tok)
	require.ErrorContains(t, err, "not a registered identity provider")

	// A clock set back re-verifies (the entry's verification time is in its future).
	src.mu.Lock()
	src.ps[iss.URL] = testProvider("idp_3", iss)
	src.mu.Unlock()
	future := iss.Claims("dan", "lark", good)
	future["nbf"] = clk.Now().Unix()
	tok = iss.Sign(future)
	_, err = v.Authenticate(ctx, tok)
	require.NoError(t, err)
	clk.Set(clk.Now().Add(-10 * time.Minute))
	_, err = v.Authenticate(ctx, tok)
	require.ErrorContains(t, err, "not valid yet")
}

// BenchmarkAuthenticate measures a JWT's first verification against its reuse.
func BenchmarkAuthenticate(b *testing.B) {
	iss := oidctest.New(b)
	src := &mutableSource{ps: map[string]identity.Provider{}}
	src.ps[iss.URL] = testProvider("idp_1", iss)
	v := New(src, Options{Client: iss.Client(), TenantClient: iss.Client()})
	tok := iss.Sign(iss.Claims("alice", "lark", map[string]any{"tenant": "acme", "groups": "devs"}))
	ctx := context.Background()
	if _, err := v.Authenticate(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.Run("reused", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Authenticate(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verified", func(b *testing.B) {
		for b.Loop() {
			v.seen = newVerifiedCache()
			if _, err := v.Authenticate(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}
