package workerproto

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Envelope is a signed message: Body (any JSON value) with the id of the key that signed it, its
// expiry (Unix seconds), a nonce and Sig, the lowercase hex HMAC-SHA256 under that key of the
// canonical JSON of the envelope without "sig".
type Envelope struct {
	KeyID string          `json:"kid"`
	Exp   int64           `json:"exp"`
	Nonce string          `json:"nonce"`
	Body  json.RawMessage `json:"body"`
	Sig   string          `json:"sig"`
}

// Verification failures. Each is wrapped by Verify with detail.
var (
	ErrUnknownKey   = errors.New("workerproto: unknown key id")
	ErrBadSignature = errors.New("workerproto: bad signature")
	ErrExpired      = errors.New("workerproto: envelope expired")
	ErrReplayed     = errors.New("workerproto: nonce already seen")
	ErrMalformed    = errors.New("workerproto: malformed envelope")
	ErrNoSigningKey = errors.New("workerproto: keyset has no signing key")
	ErrTooLong      = errors.New("workerproto: envelope valid for too long")
)

// MaxLifetime bounds how far ahead of its verifier's clock an envelope's exp may be: an envelope
// that would stay valid longer is refused (a captured one is then replayable for at most that
// long, and only where its nonce is not remembered). Parties sign for DefaultLifetime.
const (
	MaxLifetime     = 10 * time.Minute
	DefaultLifetime = 5 * time.Minute
)

// Key is one HMAC key of a keyset.
type Key struct {
	ID     string
	Secret []byte
}

// Keyset holds the keys a party accepts and the one it signs with. During a rotation both the old
// and the new key are accepted (overlap); Signer names the one new envelopes are signed with.
// A Keyset is immutable once built; it is safe for concurrent use.
type Keyset struct {
	keys   map[string][]byte
	ids    []string // in the order given: the signer first when built by ParseKeys
	signer string
}

// NewKeyset returns a keyset that accepts keys and signs with the key whose id is signer.
func NewKeyset(signer string, keys ...Key) (*Keyset, error) {
	ks := &Keyset{keys: map[string][]byte{}, signer: signer}
	for _, k := range keys {
		if k.ID == "" || len(k.Secret) < 16 {
			return nil, fmt.Errorf("workerproto: key %q: an id and a secret of at least 16 bytes are required", k.ID)
		}
		if _, dup := ks.keys[k.ID]; dup {
			return nil, fmt.Errorf("workerproto: key %q given twice", k.ID)
		}
		ks.keys[k.ID] = append([]byte(nil), k.Secret...)
		ks.ids = append(ks.ids, k.ID)
	}
	if _, ok := ks.keys[signer]; !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSigningKey, signer)
	}
	return ks, nil
}

// SigningInput is the bytes an envelope's signature covers: the canonical JSON of
// {"body":…,"exp":…,"kid":…,"nonce":…}.
func SigningInput(e Envelope) ([]byte, error) {
	body := e.Body
	if len(body) == 0 {
		body = json.RawMessage("null")
	}
	cb, err := Canonical(body)
	if err != nil {
		return nil, err
	}
	return Marshal(struct {
		Body  json.RawMessage `json:"body"`
		Exp   int64           `json:"exp"`
		KeyID string          `json:"kid"`
		Nonce string          `json:"nonce"`
	}{cb, e.Exp, e.KeyID, e.Nonce})
}

func mac(secret, input []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(input)
	return hex.EncodeToString(m.Sum(nil))
}

// IDs are the keyset's key ids, in the order they were given.
func (ks *Keyset) IDs() []string { return append([]string(nil), ks.ids...) }

// Has reports whether the keyset holds key id.
func (ks *Keyset) Has(id string) bool {
	_, ok := ks.keys[id]
	return ok
}

// Sign wraps body (encoded as JSON) in an envelope signed with the signing key, valid until
// now+ttl, with a fresh random nonce.
func (ks *Keyset) Sign(body any, now time.Time, ttl time.Duration) (Envelope, error) {
	return ks.SignWith(ks.signer, body, now, ttl)
}

// SignWith is Sign with key kid when the keyset holds it (else the signing key): an answer signed
// with the key of the request it answers verifies wherever the request was signed, so a rotation
// may add a key on either side first.
func (ks *Keyset) SignWith(kid string, body any, now time.Time, ttl time.Duration) (Envelope, error) {
	if !ks.Has(kid) {
		kid = ks.signer
	}
	raw, err := Marshal(body)
	if err != nil {
		return Envelope{}, err
	}
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return Envelope{}, err
	}
	e := Envelope{KeyID: kid, Exp: now.Add(ttl).Unix(), Nonce: base64.RawURLEncoding.EncodeToString(n[:]), Body: raw}
	in, err := SigningInput(e)
	if err != nil {
		return Envelope{}, err
	}
	e.Sig = mac(ks.keys[kid], in)
	return e, nil
}

// Verify checks e's key id, signature and expiry at now (in that order: expired, or valid for
// more than MaxLifetime from now) and, when nonces is not nil, that its nonce was not seen before.
// It never looks at Body beyond the signature.
func (ks *Keyset) Verify(e Envelope, now time.Time, nonces *NonceCache) error {
	if e.KeyID == "" || e.Nonce == "" || e.Sig == "" || len(e.Nonce) > 128 {
		return fmt.Errorf("%w: kid, nonce and sig are required", ErrMalformed)
	}
	secret, ok := ks.keys[e.KeyID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownKey, e.KeyID)
	}
	in, err := SigningInput(e)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !hmac.Equal([]byte(mac(secret, in)), []byte(e.Sig)) {
		return ErrBadSignature
	}
	if now.Unix() > e.Exp {
		return fmt.Errorf("%w at %s", ErrExpired, time.Unix(e.Exp, 0).UTC().Format(time.RFC3339))
	}
	if e.Exp > now.Add(MaxLifetime).Unix() {
		return fmt.Errorf("%w: exp %s is more than %s ahead", ErrTooLong, time.Unix(e.Exp, 0).UTC().Format(time.RFC3339), MaxLifetime)
	}
	if nonces != nil && !nonces.Add(e.Nonce, time.Unix(e.Exp, 0), now) {
		return ErrReplayed
	}
	return nil
}

// NonceCache remembers the nonces of verified envelopes until they expire, so that one can be
// replayed only after it is refused as expired. It holds at most Max nonces (oldest dropped
// first by expiry); the zero value is not usable: use NewNonceCache.
type NonceCache struct {
	mu   sync.Mutex
	seen map[string]time.Time
	max  int
}

// NewNonceCache returns a cache of at most max nonces (max <= 0: 1<<20).
func NewNonceCache(max int) *NonceCache {
	if max <= 0 {
		max = 1 << 20
	}
	return &NonceCache{seen: map[string]time.Time{}, max: max}
}

// Add records nonce as seen until exp and reports whether it was new.
func (c *NonceCache) Add(nonce string, exp, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[nonce]; ok {
		return false
	}
	if len(c.seen) >= c.max {
		for n, e := range c.seen {
			if !e.After(now) {
				delete(c.seen, n)
			}
		}
		for n := range c.seen { // still full: drop arbitrary ones (they expire soon in practice)
			if len(c.seen) < c.max {
				break
			}
			delete(c.seen, n)
		}
	}
	c.seen[nonce] = exp
	return true
}

// Len is the number of nonces held.
func (c *NonceCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// ParseKeys builds a keyset from "id:secret" strings: every key is accepted, the first signs.
func ParseKeys(specs []string) (*Keyset, error) {
	var keys []Key
	for _, spec := range specs {
		id, secret, ok := strings.Cut(strings.TrimSpace(spec), ":")
		if !ok {
			return nil, fmt.Errorf("workerproto: key %q: want id:secret", id)
		}
		keys = append(keys, Key{ID: id, Secret: []byte(secret)})
	}
	if len(keys) == 0 {
		return nil, errors.New("workerproto: no key given")
	}
	return NewKeyset(keys[0].ID, keys...)
}
