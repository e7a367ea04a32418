package oidcauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/larkrun/lark/internal/clock"
)

// Bounds of the JWKS cache: a provider's Cache-Control max-age (or Expires) is clamped to
// [MinKeyCache, MaxKeyCache], DefaultKeyCache applies without either, and after a failed refresh
// the keys held are kept and a new attempt waits FailedRefreshRetry.
const (
	MinKeyCache        = time.Minute
	MaxKeyCache        = 24 * time.Hour
	DefaultKeyCache    = 5 * time.Minute
	FailedRefreshRetry = 30 * time.Second
	maxJWKSBytes       = 1 << 20
)

// UnknownKidBurst and UnknownKidRefill bound the refreshes a token with an unknown kid may cause:
// a burst of UnknownKidBurst, then one per UnknownKidRefill. A rotated key is found at once; a
// flood of made-up kids costs the issuer a few requests, not one each.
const (
	UnknownKidBurst  = 3
	UnknownKidRefill = 10 * time.Second
)

// keySet is a provider's JWKS, cached by the provider's cache headers, refreshed on an unknown kid
// at a bounded rate. It implements go-oidc's KeySet.
type keySet struct {
	url    string
	client *http.Client
	clock  clock.Clock

	fetchMu sync.Mutex // one fetch at a time; waiters then look again
	mu      sync.RWMutex
	keys    []jose.JSONWebKey
	expires time.Time
	tokens  float64 // unknown-kid refresh budget
	filled  time.Time
	fetches int
}

func newKeySet(url string, client *http.Client, c clock.Clock) *keySet {
	return &keySet{url: url, client: client, clock: c, tokens: UnknownKidBurst, filled: c.Now()}
}

// signingAlgs are the algorithms the key set parses at all; the provider's own list is narrower and
// checked by go-oidc first.
var signingAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384,
	jose.PS512, jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// VerifySignature implements oidc.KeySet: the payload of raw if a key of the set signed it.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed JWS: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a JWT carries exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := k.current(ctx)
	if err != nil {
		return nil, err
	}
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	if !known(keys, kid) {
		if keys, err = k.refreshForKid(ctx, kid); err != nil {
			return nil, err
		}
		if payload, ok := verifyWith(jws, keys, kid); ok {
			return payload, nil
		}
	}
	return nil, errors.New("the signature does not verify with the issuer's keys")
}

func known(keys []jose.JSONWebKey, kid string) bool {
	for _, key := range keys {
		if key.KeyID == kid {
			return true
		}
	}
	return false
}

func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for _, key := range keys {
		if kid != "" && key.KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&key); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// expiry is when the keys held expire (zero before the first fetch).
func (k *keySet) expiry() time.Time {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.expires
}

// current returns the cached keys, fetching them first when none are held or they expired (a
// failed refresh keeps the old keys: an issuer's outage does not become Lark's).
func (k *keySet) current(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.RLock()
	keys, expires := k.keys, k.expires
	k.mu.RUnlock()
	if keys != nil && k.clock.Now().Before(expires) {
		return keys, nil
	}
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	k.mu.RLock()
	keys, expires = k.keys, k.expires
	k.mu.RUnlock()
	if keys != nil && k.clock.Now().Before(expires) {
		return keys, nil
	}
	fresh, err := k.fetch(ctx)
	if err != nil && keys == nil {
		return nil, err
	}
	if err != nil {
		return keys, nil
	}
	return fresh, nil
}

// refreshForKid fetches the keys again for a kid the set does not hold, within the budget.
func (k *keySet) refreshForKid(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	k.mu.Lock()
	keys := k.keys
	if known(keys, kid) { // fetched by another request meanwhile
		k.mu.Unlock()
		return keys, nil
	}
	now := k.clock.Now()
	k.tokens = min(UnknownKidBurst, k.tokens+now.Sub(k.filled).Seconds()/UnknownKidRefill.Seconds())
	k.filled = now
	if k.tokens < 1 {
		k.mu.Unlock()
		return keys, nil
	}
	k.tokens--
	k.mu.Unlock()
	fresh, err := k.fetch(ctx)
	if err != nil {
		return keys, nil
	}
	return fresh, nil
}

// fetch downloads the JWKS and stores it with its expiry; the caller holds fetchMu.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	keys, ttl, err := k.download(ctx)
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fetches++
	if err != nil {
		k.expires = now.Add(FailedRefreshRetry)
		return nil, err
	}
	k.keys, k.expires = keys, now.Add(ttl)
	return keys, nil
}

func (k *keySet) download(ctx context.Context) ([]jose.JSONWebKey, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("jwks request: %w", err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("fetching the issuer's keys: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	if err != nil {
		return nil, 0, fmt.Errorf("reading the issuer's keys: %w", err)
	}
	keys, err := parseJWKS(body)
	if err != nil {
		return nil, 0, err
	}
	return keys, cacheTTL(resp.Header, k.clock.Now()), nil
}

// parseJWKS keeps the public asymmetric signing keys of a JWKS and skips the rest (symmetric keys,
// encryption keys, key types go-jose does not know), so one odd key does not hide the others.
func parseJWKS(body []byte) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("the issuer's JWKS is not JSON: %w", err)
	}
	keys := []jose.JSONWebKey{}
	for _, raw := range doc.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) != nil || !key.Valid() || !key.IsPublic() || (key.Use != "" && key.Use != "sig") {
			continue
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// cacheTTL reads Cache-Control max-age, else Expires, clamped to [MinKeyCache, MaxKeyCache].
func cacheTTL(h http.Header, now time.Time) time.Duration {
	ttl := DefaultKeyCache
	found := false
	for _, d := range strings.Split(h.Get("Cache-Control"), ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(name) {
		case "max-age":
			if n, err := strconv.Atoi(strings.Trim(val, `"`)); err == nil && !found {
				ttl, found = time.Duration(n)*time.Second, true
			}
		case "no-store", "no-cache":
			ttl, found = 0, true
		}
	}
	if !found {
		if t, err := http.ParseTime(h.Get("Expires")); err == nil {
			ttl = t.Sub(now)
		}
	}
	return min(max(ttl, MinKeyCache), MaxKeyCache)
}
