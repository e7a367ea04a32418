package keyring_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/keyring"
)

func newKey(t *testing.T) string {
	t.Helper()
	k, err := keyring.Generate()
	require.NoError(t, err)
	return k
}

func TestSealOpenRoundTripAndBinding(t *testing.T) {
	kr, err := keyring.Parse(newKey(t))
	require.NoError(t, err)
	secret := []byte("sk_live_very_secret")
	sealed, err := kr.Seal(secret, []byte("tenant-a/stripe/1"))
	require.NoError(t, err)
	require.False(t, bytes.Contains(sealed, secret), "the plaintext is not in the sealed value")

	got, err := kr.Open(sealed, []byte("tenant-a/stripe/1"))
	require.NoError(t, err)
	require.Equal(t, secret, got)

	_, err = kr.Open(sealed, []byte("tenant-b/stripe/1"))
	require.ErrorIs(t, err, keyring.ErrCorrupt, "a value moved to another row does not open")

	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x40
		_, err := kr.Open(bad, []byte("tenant-a/stripe/1"))
		require.Error(t, err, "a flipped byte %d is detected", i)
	}
	for n := 0; n < len(sealed); n += 7 {
		_, err := kr.Open(sealed[:n], []byte("tenant-a/stripe/1"))
		require.Error(t, err, "a value cut to %d bytes is refused", n)
	}

	again, err := kr.Seal(secret, []byte("tenant-a/stripe/1"))
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "every seal uses a fresh data key and nonce")
}

func TestRotation(t *testing.T) {
	oldKey, newK := newKey(t), newKey(t)
	old, err := keyring.Parse(oldKey)
	require.NoError(t, err)
	sealed, err := old.Seal([]byte("v"), nil)
	require.NoError(t, err)

	onlyNew, err := keyring.Parse(newK)
	require.NoError(t, err)
	_, err = onlyNew.Open(sealed, nil)
	require.ErrorIs(t, err, keyring.ErrUnknownKey)

	both, err := keyring.Parse(newK + ", " + oldKey)
	require.NoError(t, err)
	require.Equal(t, onlyNew.Current(), both.Current(), "the first key seals")
	require.Equal(t, []string{onlyNew.Current(), old.Current()}, both.KeyIDs())
	require.True(t, both.NeedsRewrap(sealed))
	rewrapped, err := both.Rewrap(sealed, nil)
	require.NoError(t, err)
	require.False(t, both.NeedsRewrap(rewrapped))
	got, err := onlyNew.Open(rewrapped, nil)
	require.NoError(t, err, "after the rewrap the old key can be dropped")
	require.Equal(t, []byte("v"), got)
	same, err := both.Rewrap(rewrapped, nil)
	require.NoError(t, err)
	require.Equal(t, rewrapped, same)
}

func TestParseRefusesBadKeys(t *testing.T) {
	for _, s := range []string{"", " , ", "not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		_, err := keyring.Parse(s)
		require.Error(t, err, "%q", s)
	}
	k := newKey(t)
	_, err := keyring.Parse(strings.TrimRight(k, "="))
	require.NoError(t, err, "unpadded base64 is accepted")
	kr, err := keyring.Parse(k + "," + k)
	require.NoError(t, err)
	require.Len(t, kr.KeyIDs(), 1, "a repeated key counts once")
	require.NotContains(t, kr.Current(), k)
}
