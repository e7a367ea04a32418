package oidcauth

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/identity"
)

// MaxVerifiedTokens bounds the verified-token cache (about 200 bytes an entry); when it is full it
// starts again empty.
const MaxVerifiedTokens = 10000

// MaxVerifiedFor bounds how long a verified token is reused without checking its signature again.
const MaxVerifiedFor = 5 * time.Minute

// verifiedCache keeps the callers of tokens verified recently, by the token's SHA-256, so that a
// client sending the same JWT on every request pays for its signature and claims once: an RSA
// verification and the JSON of the token cost about as much as the rest of a small sync call.
type verifiedCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]verified
}

// verified is a token that passed every check at verifiedAt, for the provider providerID of
// issuer iss; it is reused until until (its exp with the provider's skew, the expiry of the key
// set that verified it, and MaxVerifiedFor, whichever comes first).
type verified struct {
	iss, providerID   string
	sc                auth.SecurityContext
	verifiedAt, until time.Time
}

func newVerifiedCache() *verifiedCache {
	return &verifiedCache{entries: map[[sha256.Size]byte]verified{}}
}

// remember keeps sc for raw, just verified with p's keys, expiring at exp.
func (v *Verifier) remember(raw, iss string, p identity.Provider, keys *keySet, sc auth.SecurityContext, exp time.Time) {
	now := v.opts.Clock.Now()
	until := now.Add(MaxVerifiedFor)
	if e := keys.expiry(); e.Before(until) {
		until = e
	}
	if exp.Add(p.Skew()).Before(until) {
		until = exp.Add(p.Skew())
	}
	if !now.Before(until) {
		return
	}
	sc.Roles = slices.Clone(sc.Roles)
	key := sha256.Sum256([]byte(raw))
	c := v.seen
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= MaxVerifiedTokens {
		c.entries = map[[sha256.Size]byte]verified{}
	}
	c.entries[key] = verified{iss: iss, providerID: p.ID, sc: sc, verifiedAt: now, until: until}
}

// recall answers the caller of raw when it was verified recently, its provider is still the one
// registered for its issuer (not deleted, not registered again) and still allowed by its tenant's
// policy: those are read through the provider cache, as for any token.
func (v *Verifier) recall(ctx context.Context, raw string) (auth.SecurityContext, bool) {
	key := sha256.Sum256([]byte(raw))
	c := v.seen
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if !ok {
		return auth.SecurityContext{}, false
	}
	now := v.opts.Clock.Now()
	if now.Before(e.verifiedAt) || !now.Before(e.until) {
		return auth.SecurityContext{}, false
	}
	p, allowed, err := v.provider(ctx, e.iss)
	if err != nil || !allowed || p.ID != e.providerID {
		return auth.SecurityContext{}, false
	}
	sc := e.sc
	sc.Roles = slices.Clone(sc.Roles)
	return sc, true
}
