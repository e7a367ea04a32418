package workerclient

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseServers: lark worker's --server values and the SDK's URLs: comma-separated or
// repeated, trimmed, each once, in order; anything but an http(s) base URL is refused, naming it.
func TestParseServers(t *testing.T) {
	t.Parallel()
	got, err := ParseServers("http://a:8080, https://b:8443/", "", "http://c:8080,http://a:8080")
	require.NoError(t, err)
	require.Equal(t, []string{"http://a:8080", "https://b:8443", "http://c:8080"}, got)

	_, err = ParseServers(" , ")
	require.ErrorContains(t, err, "no server URL")
	for _, bad := range []string{"a:8080", "ftp://a", "http://", "http://a/?x=1", "lark-1:8080"} {
		_, err = ParseServers(bad)
		require.ErrorContains(t, err, "server URL", bad)
	}
}
