package sqlcore_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/sqlcore"
)

// TestPack: a large compressible document is packed and unpacks to itself, its length read from
// the header; a small or incompressible one is stored as it is; fields read as json_extract does.
func TestPack(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"id":"inv_1","n":2,"ok":true,"nil":null,"o":{"a":1},"p":"` + strings.Repeat("abc", 20_000) + `"}`)
	packed := sqlcore.Pack(doc)
	require.True(t, strings.HasPrefix(packed, "~z:"))
	require.Less(t, len(packed), len(doc)/10)
	require.True(t, sqlcore.Packed([]byte(packed)))
	got, err := sqlcore.Unpack([]byte(packed))
	require.NoError(t, err)
	require.Equal(t, doc, got)
	require.Equal(t, len(doc), sqlcore.UnpackedLen(packed))
	require.Equal(t, 3, sqlcore.UnpackedLen("abc"))

	small := []byte(`{"id":"inv_1"}`)
	require.Equal(t, string(small), sqlcore.Pack(small))
	random := make([]byte, 0, 40_000)
	for i := range 40_000 {
		random = append(random, byte('!'+(i*7919)%89))
	}
	noise := []byte(`"` + strings.ReplaceAll(string(random), `"`, "x") + `"`)
	if p := sqlcore.Pack(noise); !strings.HasPrefix(p, "~z:") {
		require.Equal(t, string(noise), p, "a document packing would not shrink by a quarter is stored as it is")
	}
	_, err = sqlcore.Unpack([]byte("~z:not base64!"))
	require.Error(t, err, "a corrupt packed value is an error, not a panic")

	for field, want := range map[string]any{"id": "inv_1", "n": float64(2), "ok": int64(1), "nil": nil, "o": `{"a":1}`, "missing": nil} {
		require.Equal(t, want, sqlcore.JSONFieldOf([]byte(packed), field), field)
	}
	require.Nil(t, sqlcore.JSONFieldOf([]byte("~z:garbage"), "id"))
}
