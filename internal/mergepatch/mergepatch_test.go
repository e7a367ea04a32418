package mergepatch_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/mergepatch"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

// The examples of RFC 7396 Appendix A.
func TestApplyRFC7396(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	} {
		require.Equal(t, decode(t, tc.want), mergepatch.Apply(decode(t, tc.target), decode(t, tc.patch)), "%s + %s", tc.target, tc.patch)
	}
}

func ExampleApply() {
	var target, patch any
	_ = json.Unmarshal([]byte(`{"name":"nightly","expression":{"kind":"cron","value":"0 2 * * *"},"status":"paused"}`), &target)
	_ = json.Unmarshal([]byte(`{"expression":{"value":"0 3 * * *"},"status":null}`), &patch)
	out, err := json.Marshal(mergepatch.Apply(target, patch))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"expression":{"kind":"cron","value":"0 3 * * *"},"name":"nightly"}
}

func ExampleChanged() {
	type spec struct {
		Name   string `json:"name"`
		Expr   string `json:"expression"`
		Paused bool   `json:"paused,omitempty"`
	}
	fields, err := mergepatch.Changed(spec{Name: "nightly", Expr: "0 2 * * *", Paused: true}, spec{Name: "nightly", Expr: "0 3 * * *"})
	if err != nil {
		panic(err)
	}
	fmt.Println(fields)
	// Output: [expression paused]
}

func TestChangedRefusesWhatDoesNotEncode(t *testing.T) {
	_, err := mergepatch.Changed(map[string]any{"f": func() {}}, map[string]any{})
	require.Error(t, err)
}
