package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"sync"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// published is how many keys the key set serves: the signing key and the two before it.
const published = 3

// key is one RSA signing key.
type key struct {
	id   string
	priv *rsa.PrivateKey
}

func (k key) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k key) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k key) ID() string                                  { return k.id }
func (k key) Use() string                                 { return "sig" }

// Key is the private key when signing (op.SigningKey) and the public one in the key set
// (publicKey).
func (k key) Key() any { return k.priv }

// publicKey is a key as the key set publishes it.
type publicKey struct{ key }

func (k publicKey) Key() any { return &k.priv.PublicKey }

// keyring holds the keys, newest (the signing key) first.
type keyring struct {
	mu   sync.Mutex
	keys []key
}

func newKeyring() (*keyring, error) {
	k := &keyring{}
	k.rotate()
	return k, nil
}

// rotate makes a new key the signing key and returns its id.
func (k *keyring) rotate() string {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err) // the system's random source failed
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	n := key{id: hex.EncodeToString(b), priv: priv}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append([]key{n}, k.keys...)
	if len(k.keys) > published {
		k.keys = k.keys[:published]
	}
	return n.id
}

// SigningKey is the newest key.
func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	return s.keys.keys[0], nil
}

// SignatureAlgorithms is RS256 only.
func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

// KeySet publishes the public halves of the kept keys.
func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	out := make([]op.Key, len(s.keys.keys))
	for i, k := range s.keys.keys {
		out[i] = publicKey{k}
	}
	return out, nil
}
