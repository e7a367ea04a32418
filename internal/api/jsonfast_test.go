package api

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fast path accepts what the token walk accepts, and hands everything else to it.
func TestFastCheckJSON(t *testing.T) {
	t.Parallel()
	many := func(n int, dup bool) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d":%d`, i, i)
		}
		if dup {
			b.WriteString(`,"k7":0`)
		}
		b.WriteString("}")
		return b.String()
	}
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"entrypoint_id":"x","mode":"sync","params":{"invoice_id":"inv_001","amount":100}}`, true},
		{` [1, {"a": "b"}, "c:", {"a": 2}] `, true}, // the same name in two objects; a colon in a string
		{`{"a":1,"a":2}`, false},
		{`{"a":1,"\u0061":2}`, false}, // the same name, once escaped
		{`{"a":{"a":1},"b":2}`, true},
		{`{"s":"\ud83d\ude00"}`, true}, // a surrogate pair
		{`{"s":"\ud83d"}`, false},
		{`{"s":"\ude00 x"}`, false},
		{`{"s":"\\ud800"}`, true}, // an escaped backslash, then text
		{"{\"s\":\"\xff\"}", false},
		{`{} {}`, false},
		{many(40, false), true},
		{many(40, true), false}, // past smallObject: the set
		{deep(MaxJSONDepth), true},
		{deep(MaxJSONDepth + 1), false},
	} {
		require.Equal(t, c.ok, fastCheckJSON([]byte(c.body)), "%s", c.body)
		require.Equal(t, c.ok, checkJSON([]byte(c.body)) == nil, "%s", c.body)
	}
}

func BenchmarkCheckJSON(b *testing.B) {
	body := []byte(`{"entrypoint_id": "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.calculate_tax.v1~",
       "mode": "sync", "params": {"invoice_id": "inv_001", "amount": 100}}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if !fastCheckJSON(body) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			if explainJSON(bytes.Clone(body)) != nil {
				b.Fatal("refused")
			}
		}
	})
}
