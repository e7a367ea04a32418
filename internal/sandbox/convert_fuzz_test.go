package sandbox

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"

	"github.com/larkrun/lark/internal/invocation"
)

// FuzzConvertJSON: any JSON document (as params or an HTTP body reach user code) converts to
// Starlark and back within a memory budget and a payload limit, or fails with an error; never a
// panic. What comes back is JSON no deeper than what may be stored, and no larger than the limit.
func FuzzConvertJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[1, 2.5, -0, 1e308, 12345678901234567890]`, `{"a": {"b": [null, true, "x"]}}`,
		`"\u0000\ud83d\ude00"`, string(bytes.Repeat([]byte("["), 150)) + string(bytes.Repeat([]byte("]"), 150)),
		`{"k": "` + string(bytes.Repeat([]byte("x"), 5000)) + `"}`} {
		f.Add([]byte(s))
	}
	const limit = 4096
	f.Fuzz(func(t *testing.T, b []byte) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var in any
		if dec.Decode(&in) != nil {
			return
		}
		thread := &starlark.Thread{}
		thread.SetMaxAllocBytes(1 << 20)
		v, err := toStarlark(thread, in)
		if err != nil {
			return
		}
		out, err := toGoLimit(thread, v, "the result", limit)
		if err != nil {
			return
		}
		enc, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("converted value does not encode: %v", err)
		}
		if len(enc) > 2*limit+64 { // the estimate ignores escapes: at most doubled by them
			t.Fatalf("converted %d bytes under a %d-byte limit", len(enc), limit)
		}
		if path, deep := invocation.TooDeep("$", out); deep {
			t.Fatalf("converted a value nested too deep to store, at %s", path)
		}
	})
}
