package workerproto

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCanonical(t *testing.T) {
	cases := map[string]string{
		`{ "tenant": "acme", "date": "2025-01-15" }`: `{"date":"2025-01-15","tenant":"acme"}`,
		`[1, 1.50, -0, 1e10, {"b":[],"a":{}}]`:       `[1,1.50,-0,1e10,{"a":{},"b":[]}]`,
		`"a<b>&\u00e9\u2028"`:                        "\"a<b>&é\\u2028\"",
		`{"é":1,"z":2,"A":3}`:                        `{"A":3,"z":2,"é":1}`,
		` null `:                                     `null`,
		// docs/workers.md's test vector.
		`{ "b" : 1.50, "a" : "<\u00e9>\u2028\/" }`: "{\"a\":\"<é>\\u2028/\",\"b\":1.50}",
	}
	for in, want := range cases {
		got, err := Canonical([]byte(in))
		require.NoError(t, err, in)
		require.Equal(t, want, string(got), in)
	}
	for _, bad := range []string{``, `{"a":1,"a":2}`, `1 2`, "\"\xff\"", `{`, `[1,]`} {
		_, err := Canonical([]byte(bad))
		require.ErrorIs(t, err, ErrNotCanonicalizable, bad)
	}
	deep := ""
	for range MaxDepth + 2 {
		deep += "["
	}
	_, err := Canonical([]byte(deep))
	require.ErrorIs(t, err, ErrNotCanonicalizable)
}

// FuzzCanonical: the canonical form is valid JSON, a fixed point, and means the same value.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `1.0`, `"\u0000"`, `{"a":{"c":1,"b":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Canonical(in)
		if err != nil {
			return
		}
		again, err := Canonical(c)
		require.NoError(t, err)
		require.Equal(t, string(c), string(again))
		var a, b any
		require.NoError(t, json.Unmarshal(in, &a))
		require.NoError(t, json.Unmarshal(c, &b))
		require.Equal(t, a, b)
	})
}

func keys(t *testing.T, signer string, ids ...string) *Keyset {
	var ks []Key
	for _, id := range ids {
		ks = append(ks, Key{ID: id, Secret: []byte("secret-of-" + id + "-0123456789")})
	}
	k, err := NewKeyset(signer, ks...)
	require.NoError(t, err)
	return k
}

func TestEnvelope(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ks := keys(t, "k1", "k1")
	e, err := ks.Sign(map[string]any{"b": 1, "a": "x"}, now, time.Minute)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"x","b":1}`, string(e.Body))
	require.NoError(t, ks.Verify(e, now, nil))

	// A body re-encoded with other whitespace and key order still verifies (canonical form).
	e2 := e
	e2.Body = json.RawMessage("{ \"b\" : 1,\n \"a\":\"x\" }")
	require.NoError(t, ks.Verify(e2, now, nil))

	tampered := e
	tampered.Body = json.RawMessage(`{"a":"y","b":1}`)
	require.ErrorIs(t, ks.Verify(tampered, now, nil), ErrBadSignature)
	later := e
	later.Exp++
	require.ErrorIs(t, ks.Verify(later, now, nil), ErrBadSignature)
	require.ErrorIs(t, ks.Verify(e, now.Add(2*time.Minute), nil), ErrExpired)
	unknown := e
	unknown.KeyID = "k9"
	require.ErrorIs(t, ks.Verify(unknown, now, nil), ErrUnknownKey)
	require.ErrorIs(t, ks.Verify(Envelope{KeyID: "k1"}, now, nil), ErrMalformed)
	// Another key with the same id does not verify.
	other, err := NewKeyset("k1", Key{ID: "k1", Secret: []byte("another-secret-0123456789")})
	require.NoError(t, err)
	require.ErrorIs(t, other.Verify(e, now, nil), ErrBadSignature)
}

func TestNonceReplay(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ks := keys(t, "k1", "k1")
	nc := NewNonceCache(2)
	e, err := ks.Sign("x", now, time.Minute)
	require.NoError(t, err)
	require.NoError(t, ks.Verify(e, now, nc))
	require.ErrorIs(t, ks.Verify(e, now, nc), ErrReplayed)
	// The cache is bounded: expired nonces make room.
	for i := range 5 {
		at := now.Add(time.Duration(i+1) * 10 * time.Second)
		e, err := ks.Sign("x", at, time.Second)
		require.NoError(t, err)
		require.NoError(t, ks.Verify(e, at, nc))
		require.LessOrEqual(t, nc.Len(), 2)
	}
}

func TestKeyRotationOverlap(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	old := keys(t, "k1", "k1")
	overlap := keys(t, "k2", "k1", "k2") // accepts both, signs with the new one
	next := keys(t, "k2", "k2")
	eOld, err := old.Sign("m", now, time.Minute)
	require.NoError(t, err)
	eNew, err := overlap.Sign("m", now, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "k2", eNew.KeyID)
	require.NoError(t, overlap.Verify(eOld, now, nil))
	require.NoError(t, overlap.Verify(eNew, now, nil))
	require.NoError(t, next.Verify(eNew, now, nil))
	require.True(t, errors.Is(next.Verify(eOld, now, nil), ErrUnknownKey))
	require.ErrorIs(t, old.Verify(eNew, now, nil), ErrUnknownKey)

	_, err = NewKeyset("k3", Key{ID: "k1", Secret: []byte("0123456789abcdef")})
	require.ErrorIs(t, err, ErrNoSigningKey)
	_, err = NewKeyset("k1", Key{ID: "k1", Secret: []byte("short")})
	require.Error(t, err)
}
