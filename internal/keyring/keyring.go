// Package keyring encrypts small secrets at rest with envelope encryption: every sealed value has
// its own random data key (AES-256-GCM), and that data key is wrapped by a key-encryption key (KEK)
// from the operator's master key setting. Several KEKs may be configured at once — the first seals,
// all of them open — so the master key can be rotated: configure "NEW,OLD", rewrap what was sealed
// under OLD (Rewrap), then drop OLD.
//
// A sealed value is self-describing: it names the KEK that wrapped its data key by a fingerprint of
// the key (never the key itself), so no key ids have to be managed. Additional authenticated data
// (AAD) binds a sealed value to where it is stored (for example tenant, secret name and version):
// a ciphertext copied to another row does not open.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the size of a key-encryption key and of a data key: 32 bytes (AES-256).
const KeySize = 32

// format is the first byte of a sealed value.
const format byte = 1

// ErrUnknownKey is returned by Open when the value was sealed under a KEK that is not configured.
var ErrUnknownKey = errors.New("keyring: the value was sealed under a master key that is not configured")

// ErrCorrupt is returned by Open when the value is malformed or fails authentication (wrong AAD,
// tampering, truncation).
var ErrCorrupt = errors.New("keyring: the sealed value is corrupt or does not belong here")

// Keyring holds the configured key-encryption keys. It is safe for concurrent use.
type Keyring struct {
	current string
	keks    map[string]cipher.AEAD
	order   []string
}

// Parse reads a master key setting: one or more base64-encoded 32-byte keys separated by commas,
// the first of which seals new values. Standard and URL-safe base64, with or without padding, are
// accepted; surrounding spaces are ignored.
func Parse(setting string) (*Keyring, error) {
	var keys [][]byte
	for i, part := range strings.Split(setting, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, err := decodeKey(part)
		if err != nil {
			return nil, fmt.Errorf("keyring: master key %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("keyring: no master key given")
	}
	return New(keys...)
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("decodes to %d bytes, want %d", len(k), KeySize)
			}
			return k, nil
		}
	}
	return nil, errors.New("is not base64")
}

// New builds a keyring from raw 32-byte keys; the first seals new values.
func New(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("keyring: no master key given")
	}
	kr := &Keyring{keks: map[string]cipher.AEAD{}}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("keyring: master key %d is %d bytes, want %d", i+1, len(k), KeySize)
		}
		a, err := newAEAD(k)
		if err != nil {
			return nil, err
		}
		id := Fingerprint(k)
		if _, dup := kr.keks[id]; dup {
			continue
		}
		kr.keks[id] = a
		kr.order = append(kr.order, id)
	}
	kr.current = kr.order[0]
	return kr, nil
}

// Generate returns a new random master key setting (one base64 key), as `lark dev` writes it.
func Generate() (string, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(k), nil
}

// Fingerprint names a key without revealing it: the first 8 bytes of SHA-256 over a domain
// prefix and the key, in hex.
func Fingerprint(key []byte) string {
	h := sha256.Sum256(append([]byte("lark-kek-v1:"), key...))
	return hex.EncodeToString(h[:8])
}

// Current is the fingerprint of the key that seals new values.
func (k *Keyring) Current() string { return k.current }

// KeyIDs lists the fingerprints of the configured keys, the sealing one first.
func (k *Keyring) KeyIDs() []string { return append([]string(nil), k.order...) }

func newAEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Seal encrypts plaintext under a fresh data key wrapped by the current KEK, binding it to aad.
//
// Layout: format(1) | len(kekID)(1) | kekID | len(wrapped)(2) | wrapped data key (nonce+ct) |
// nonce(12) | ciphertext. The header is part of the AAD of both encryptions.
func (k *Keyring) Seal(plaintext, aad []byte) ([]byte, error) {
	dek := make([]byte, KeySize)
	if _, err := rand.Read(dek); err != nil {
		return nil, err
	}
	defer clear(dek)
	return k.sealWith(dek, plaintext, aad)
}

func (k *Keyring) sealWith(dek, plaintext, aad []byte) ([]byte, error) {
	kek := k.keks[k.current]
	header := append([]byte{format, byte(len(k.current))}, k.current...)
	wrapNonce := make([]byte, kek.NonceSize())
	if _, err := rand.Read(wrapNonce); err != nil {
		return nil, err
	}
	wrapped := kek.Seal(wrapNonce, wrapNonce, dek, append(append([]byte("dek:"), header...), aad...))
	out := append(header, 0, 0)
	binary.BigEndian.PutUint16(out[len(out)-2:], uint16(len(wrapped)))
	out = append(out, wrapped...)
	d, err := newAEAD(dek)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, d.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return d.Seal(out, nonce, plaintext, append(append([]byte("val:"), header...), aad...)), nil
}

type parsed struct {
	header, wrapped, nonce, ct []byte
	kekID                      string
}

func parse(sealed []byte) (parsed, error) {
	var p parsed
	if len(sealed) < 2 || sealed[0] != format {
		return p, ErrCorrupt
	}
	n := int(sealed[1])
	if len(sealed) < 2+n+2 {
		return p, ErrCorrupt
	}
	p.header, p.kekID = sealed[:2+n], string(sealed[2:2+n])
	rest := sealed[2+n:]
	w := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) < w+12+16 {
		return p, ErrCorrupt
	}
	p.wrapped, p.nonce, p.ct = rest[:w], rest[w:w+12], rest[w+12:]
	return p, nil
}

// KeyIDOf reports the fingerprint of the KEK a sealed value names ("" when it is malformed).
func KeyIDOf(sealed []byte) string {
	p, err := parse(sealed)
	if err != nil {
		return ""
	}
	return p.kekID
}

// Open decrypts a value sealed by Seal with the same aad.
func (k *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	dek, p, err := k.unwrap(sealed, aad)
	if err != nil {
		return nil, err
	}
	defer clear(dek)
	d, err := newAEAD(dek)
	if err != nil {
		return nil, ErrCorrupt
	}
	pt, err := d.Open(nil, p.nonce, p.ct, append(append([]byte("val:"), p.header...), aad...))
	if err != nil {
		return nil, ErrCorrupt
	}
	return pt, nil
}

func (k *Keyring) unwrap(sealed, aad []byte) ([]byte, parsed, error) {
	p, err := parse(sealed)
	if err != nil {
		return nil, p, err
	}
	kek, ok := k.keks[p.kekID]
	if !ok {
		return nil, p, ErrUnknownKey
	}
	if len(p.wrapped) < kek.NonceSize() {
		return nil, p, ErrCorrupt
	}
	dek, err := kek.Open(nil, p.wrapped[:kek.NonceSize()], p.wrapped[kek.NonceSize():], append(append([]byte("dek:"), p.header...), aad...))
	if err != nil || len(dek) != KeySize {
		return nil, p, ErrCorrupt
	}
	return dek, p, nil
}

// NeedsRewrap reports whether a sealed value was wrapped by a key other than the current one.
func (k *Keyring) NeedsRewrap(sealed []byte) bool { return KeyIDOf(sealed) != k.current }

// Rewrap re-seals a value under the current KEK (a new data key, the same plaintext and aad): the
// step of a master-key rotation. A value already under the current key is returned unchanged.
func (k *Keyring) Rewrap(sealed, aad []byte) ([]byte, error) {
	if !k.NeedsRewrap(sealed) {
		return sealed, nil
	}
	pt, err := k.Open(sealed, aad)
	if err != nil {
		return nil, err
	}
	defer clear(pt)
	return k.Seal(pt, aad)
}
