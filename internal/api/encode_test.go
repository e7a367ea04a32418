package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
)

// TestEncodeBodyIsMarshal: a record's answer encoded around large params and result is what
// json.Marshal writes, byte for byte, when they are compact; small ones and other values go
// through json.Marshal.
func TestEncodeBodyIsMarshal(t *testing.T) {
	t.Parallel()
	big := json.RawMessage(`{"p":"` + strings.Repeat("x", spliceAbove) + `"}`)
	rec := invocation.Record{ID: "inv_1", TenantID: `t"params":null,"result":null`, EntrypointID: "ep", Status: invocation.StatusSucceeded,
		Mode: invocation.ModeSync, CreatedAt: time.Unix(0, 0).UTC(),
		Error: &invocation.Error{Message: "m", Details: json.RawMessage(`{"params":null,"result":null}`)}}
	for name, pr := range map[string][2]json.RawMessage{
		"both":         {big, json.RawMessage(`{"r":` + string(big) + `}`)},
		"big params":   {big, nil},
		"big result":   {nil, big},
		"small":        {json.RawMessage(`{"a":1}`), json.RawMessage(`2`)},
		"small, empty": {nil, nil},
	} {
		t.Run(name, func(t *testing.T) {
			r := rec
			r.Params, r.Result = pr[0], pr[1]
			for _, v := range []any{View(r), ResultView{Record: View(r), Cached: true}, map[string]any{"params": big}} {
				want, err := json.Marshal(v)
				require.NoError(t, err)
				got, err := encodeBody(v)
				require.NoError(t, err)
				require.Equal(t, string(want), string(got))
			}
		})
	}
}

// TestEncodeBodyCopiesLargePayloads: large params are copied as they are (json.Marshal would have
// re-scanned and compacted them), and the answer is still valid JSON that decodes to the record.
func TestEncodeBodyCopiesLargePayloads(t *testing.T) {
	t.Parallel()
	params := json.RawMessage(`{ "p" : "` + strings.Repeat("x", spliceAbove) + `" }`)
	rec := invocation.Record{ID: "inv_1", TenantID: "t", Mode: invocation.ModeSync, Params: params, Result: json.RawMessage(`[1, 2]`)}
	got, err := encodeBody(ResultView{Record: View(rec)})
	require.NoError(t, err)
	require.Contains(t, string(got), `"params":`+string(params)+`,"result":[1, 2],`)
	var back ResultView
	require.NoError(t, json.Unmarshal(got, &back))
	require.JSONEq(t, string(params), string(back.Record.Params))
	require.Equal(t, "inv_1", back.Record.InvocationID)
}
