package eventfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// decode decodes JSON the way event payloads are decoded: numbers as json.Number.
func decode(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

func match(t *testing.T, expr string, payload any) (bool, error) {
	t.Helper()
	f, err := Compile(expr)
	require.NoError(t, err)
	return f.Match(Event{Payload: payload})
}

// requireFilterError checks that err is an *Error about expr whose message contains want.
func requireFilterError(t *testing.T, err error, expr, want string) {
	t.Helper()
	require.Error(t, err)
	var fe *Error
	require.True(t, errors.As(err, &fe), "error %T is not *Error", err)
	require.Equal(t, expr, fe.Expr)
	require.Contains(t, fe.Msg, want)
	require.Contains(t, err.Error(), want)
}

func TestSpecExamples(t *testing.T) {
	payloads := map[string]string{
		"big order": `{
			"order_id": "ord_1",
			"customer_id": "cust_123",
			"total": 150,
			"priority": "high",
			"shipping": {"region": "US-CA", "method": "ground"}
		}`,
		"small order": `{
			"order_id": null,
			"customer_id": "cust_999",
			"total": 99.5,
			"priority": "low",
			"shipping": {"region": "EU-DE"}
		}`,
		"total 100":         `{"total": 100}`,
		"total 100.01":      `{"total": 100.01}`,
		"US-NY":             `{"shipping": {"region": "US-NY"}}`,
		"big low priority":  `{"total": 150, "priority": "low"}`,
		"big high priority": `{"total": 150.5, "priority": "high"}`,
	}
	tests := []struct {
		expr    string
		payload string // key of payloads
		want    bool
	}{
		{`payload.total > 100`, "big order", true},
		{`payload.total > 100`, "small order", false},
		{`payload.total > 100`, "total 100", false},
		{`payload.total > 100`, "total 100.01", true},
		{`payload.customer_id == "cust_123"`, "big order", true},
		{`payload.customer_id == "cust_123"`, "small order", false},
		{`payload.shipping.region in ["US-CA", "US-NY"]`, "big order", true},
		{`payload.shipping.region in ["US-CA", "US-NY"]`, "US-NY", true},
		{`payload.shipping.region in ["US-CA", "US-NY"]`, "small order", false},
		{`payload.total > 100 && payload.priority == "high"`, "big order", true},
		{`payload.total > 100 && payload.priority == "high"`, "big high priority", true},
		{`payload.total > 100 && payload.priority == "high"`, "big low priority", false},
		{`payload.total > 100 && payload.priority == "high"`, "small order", false},
		{`payload.order_id != null`, "big order", true},
		{`payload.order_id != null`, "small order", false}, // present but null
	}
	for _, tt := range tests {
		t.Run(tt.expr+" on "+tt.payload, func(t *testing.T) {
			got, err := match(t, tt.expr, decode(t, payloads[tt.payload]))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestNumbers(t *testing.T) {
	// Every representation of the same numbers behaves alike.
	for _, tt := range []struct {
		name        string
		big, small  any
		three, half any
	}{
		{"json.Number", json.Number("150"), json.Number("50"), json.Number("3"), json.Number("0.5")},
		{"json.Number float syntax", json.Number("150.0"), json.Number("5e1"), json.Number("3.0"), json.Number("5E-1")},
		{"float64", 150.0, 50.0, 3.0, 0.5},
		{"int64", int64(150), int64(50), int64(3), 0.5},
		{"int", 150, 50, 3, float32(0.5)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			payload := map[string]any{"big": tt.big, "small": tt.small, "three": tt.three, "half": tt.half}
			for expr, want := range map[string]bool{
				`payload.big > 100`:                          true,
				`payload.small > 100`:                        false,
				`payload.big > 100.0`:                        true,
				`payload.big >= 150 && payload.big <= 150.0`: true,
				`payload.small < 50.5`:                       true,
				`payload.three == 3`:                         true,
				`payload.three == 3.0`:                       true,
				`payload.three != 3`:                         false,
				`payload.three in [1, 2, 3]`:                 true,
				`payload.half < 1`:                           true,
				`payload.half == 0.5`:                        true,
				`payload.half > 0`:                           true,
				`payload.big - payload.small == 100`:         true,
			} {
				got, err := match(t, expr, payload)
				require.NoError(t, err, expr)
				require.Equal(t, want, got, expr)
			}
		})
	}

	t.Run("fractional json.Number", func(t *testing.T) {
		got, err := match(t, `payload.total > 100`, decode(t, `{"total": 150.5}`))
		require.NoError(t, err)
		require.True(t, got)
		got, err = match(t, `payload.total > 100`, decode(t, `{"total": 100.5}`))
		require.NoError(t, err)
		require.True(t, got)
		got, err = match(t, `payload.total > 100`, decode(t, `{"total": 99.99}`))
		require.NoError(t, err)
		require.False(t, got)
	})

	t.Run("integer json.Number is exact", func(t *testing.T) {
		// 2^53+1 is not representable as float64; as int64 it compares exactly.
		got, err := match(t, `payload.id == 9007199254740993`, decode(t, `{"id": 9007199254740993}`))
		require.NoError(t, err)
		require.True(t, got)
	})

	t.Run("out-of-range json.Number becomes float64", func(t *testing.T) {
		got, err := match(t, `payload.n > 9223372036854775807`, decode(t, `{"n": 100000000000000000000}`))
		require.NoError(t, err)
		require.True(t, got)
		got, err = match(t, `payload.n > 100`, decode(t, `{"n": 1e400}`)) // +Inf
		require.NoError(t, err)
		require.True(t, got)
	})

	t.Run("arithmetic does not mix int and double", func(t *testing.T) {
		// Comparisons work across numeric types, arithmetic does not.
		got, err := match(t, `payload.total * 2 > 100`, decode(t, `{"total": 150}`))
		require.NoError(t, err)
		require.True(t, got)
		got, err = match(t, `payload.total * 2 > 100`, decode(t, `{"total": 150.5}`))
		require.False(t, got)
		requireFilterError(t, err, `payload.total * 2 > 100`, "no such overload")
		got, err = match(t, `double(payload.total) * 2.0 > 100`, decode(t, `{"total": 150.5}`))
		require.NoError(t, err)
		require.True(t, got)
		got, err = match(t, `double(payload.total) * 2.0 > 100`, decode(t, `{"total": 150}`))
		require.NoError(t, err)
		require.True(t, got)
	})

	t.Run("checked cross-type comparison", func(t *testing.T) {
		// size() is int, 1.5 is double: needs cross-type numeric comparisons in the type checker.
		got, err := match(t, `size(payload.items) > 1.5`, decode(t, `{"items": [1, 2]}`))
		require.NoError(t, err)
		require.True(t, got)
	})

	t.Run("invalid json.Number", func(t *testing.T) {
		for _, n := range []string{"abc", "NaN", "Inf", "0x10", "1_000", ""} {
			_, err := match(t, `payload.n > 1`, map[string]any{"n": json.Number(n)})
			requireFilterError(t, err, `payload.n > 1`, "invalid number")
		}
	})
}

func TestNestedPayload(t *testing.T) {
	payload := decode(t, `{
		"customer": {"address": {"country": "US", "zip": "94107"}, "tier": 2},
		"items": [
			{"sku": "A", "qty": 1, "price": 9.99},
			{"sku": "B", "qty": 3, "price": 20}
		],
		"tags": ["gift", "rush"],
		"matrix": [[1, 2], [3, 4.5]]
	}`)
	for expr, want := range map[string]bool{
		`payload.customer.address.country == "US"`:                   true,
		`payload.customer["address"]["zip"].startsWith("941")`:       true,
		`payload.customer.tier >= 2`:                                 true,
		`payload.items[1].sku == "B"`:                                true,
		`payload.items.exists(i, i.qty > 2)`:                         true,
		`payload.items.all(i, i.price < 20)`:                         false,
		`payload.items.filter(i, i.price > 10).size() == 1`:          true,
		`payload.items.map(i, i.qty).exists(x, x == 3)`:              true,
		`size(payload.items) == 2`:                                   true,
		`"rush" in payload.tags`:                                     true,
		`"express" in payload.tags`:                                  false,
		`payload.matrix[1][1] > 4`:                                   true,
		`has(payload.customer.address)`:                              true,
		`has(payload.customer.email)`:                                false,
		`"address" in payload.customer`:                              true,
		`payload.customer.address.country.matches("^[A-Z]{2}$")`:     true,
		`payload.items.exists(i, i.sku in ["B", "C"] && i.qty == 3)`: true,
	} {
		got, err := match(t, expr, payload)
		require.NoError(t, err, expr)
		require.Equal(t, want, got, expr)
	}
}

func TestInLists(t *testing.T) {
	for _, tt := range []struct {
		expr    string
		payload string
		want    bool
	}{
		{`payload.status in ["paid", "shipped"]`, `{"status": "paid"}`, true},
		{`payload.status in ["paid", "shipped"]`, `{"status": "PAID"}`, false},
		{`payload.code in [200, 201, 204]`, `{"code": 201}`, true},
		{`payload.code in [200, 201, 204]`, `{"code": 201.0}`, true},
		{`payload.code in [200, 201, 204]`, `{"code": 500}`, false},
		{`!(payload.status in ["cancelled"])`, `{"status": "paid"}`, true},
		{`"US-CA" in payload.regions`, `{"regions": ["US-NY", "US-CA"]}`, true},
		{`payload.status in payload.allowed`, `{"status": "b", "allowed": ["a", "b"]}`, true},
		{`payload.status in []`, `{"status": "b"}`, false},
	} {
		got, err := match(t, tt.expr, decode(t, tt.payload))
		require.NoError(t, err, tt.expr)
		require.Equal(t, tt.want, got, "%s on %s", tt.expr, tt.payload)
	}
}

func TestEventVariables(t *testing.T) {
	ev := Event{ID: "evt_1", TypeID: "order.created.v1", Source: "shop", Subject: "orders/42", Payload: map[string]any{}}
	for expr, want := range map[string]bool{
		`event_id == "evt_1"`:                         true,
		`event_type_id.startsWith("order.")`:          true,
		`source == "shop" && subject.endsWith("/42")`: true,
		`source == "billing"`:                         false,
		`size(payload) == 0`:                          true,
	} {
		f, err := Compile(expr)
		require.NoError(t, err, expr)
		got, err := f.Match(ev)
		require.NoError(t, err, expr)
		require.Equal(t, want, got, expr)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, expr string
		want       []string // substrings of the message
	}{
		{"empty", ``, []string{"empty expression"}},
		{"blank", `   `, []string{"Syntax error"}},
		{"syntax error position", `payload.total >`, []string{"Syntax error", "1:16"}},
		{"syntax error second line", "payload.total > 1 &&\n  payload.x ==", []string{"Syntax error", "2:15"}},
		{"unbalanced", `(payload.total > 1`, []string{"Syntax error", "1:19"}},
		{"unknown variable", `foo == 1`, []string{"undeclared reference to 'foo'", "1:1"}},
		{"unknown function", `payload.total.frobnicate()`, []string{"undeclared reference to 'frobnicate'"}},
		{"type error", `event_id == 1`, []string{"no matching overload", "1:10"}},
		{"non-bool int", `payload.total + 1`, []string{"has type int, must be bool"}},
		{"non-bool string", `"yes"`, []string{"has type string, must be bool"}},
		{"non-bool list", `[true]`, []string{"has type list(bool), must be bool"}},
		{"non-bool null", `null`, []string{"must be bool"}},
		{"invalid regex literal", `payload.name.matches("[")`, []string{"invalid matches argument"}},
		{"invalid duration literal", `duration("forever") > duration("1s")`, []string{"invalid duration argument"}},
		{"too long", `payload.total > 1` + strings.Repeat(" ", MaxExprBytes), []string{"longer than the limit of 4096"}},
		{"invalid UTF-8", "payload.name == \"\xff\"", []string{"not valid UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Compile(tt.expr)
			require.Nil(t, f)
			for _, w := range tt.want {
				requireFilterError(t, err, tt.expr, w)
			}
		})
	}

	t.Run("exactly MaxExprBytes is allowed", func(t *testing.T) {
		expr := `payload.total > 1` + strings.Repeat(" ", MaxExprBytes-len(`payload.total > 1`))
		require.Len(t, expr, MaxExprBytes)
		_, err := Compile(expr)
		require.NoError(t, err)
	})

	t.Run("dyn result is checked at Match", func(t *testing.T) {
		// payload.flag has type dyn: accepted at compile time, checked at Match.
		f, err := Compile(`payload.flag`)
		require.NoError(t, err)
		got, err := f.Match(Event{Payload: map[string]any{"flag": true}})
		require.NoError(t, err)
		require.True(t, got)

		got, err = f.Match(Event{Payload: decode(t, `{"flag": 1}`)})
		require.False(t, got)
		requireFilterError(t, err, `payload.flag`, "result is int, not bool")

		got, err = f.Match(Event{Payload: decode(t, `{"flag": "true"}`)})
		require.False(t, got)
		requireFilterError(t, err, `payload.flag`, "result is string, not bool")

		f, err = Compile(`payload`)
		require.NoError(t, err)
		got, err = f.Match(Event{Payload: map[string]any{}})
		require.False(t, got)
		requireFilterError(t, err, `payload`, "result is map, not bool")
	})
}

func TestMissingKeys(t *testing.T) {
	empty := decode(t, `{}`)
	t.Run("missing key is an error", func(t *testing.T) {
		for _, expr := range []string{
			`payload.order_id != null`,
			`payload.order_id == null`,
			`payload.total > 100`,
			`payload.shipping.region in ["US-CA"]`,
		} {
			got, err := match(t, expr, empty)
			require.False(t, got, expr)
			requireFilterError(t, err, expr, "no such key")
		}
	})
	t.Run("missing nested key", func(t *testing.T) {
		got, err := match(t, `payload.shipping.region == "US-CA"`, decode(t, `{"shipping": {}}`))
		require.False(t, got)
		requireFilterError(t, err, `payload.shipping.region == "US-CA"`, "no such key: region")
	})
	t.Run("nil payload", func(t *testing.T) {
		got, err := match(t, `payload.total > 100`, nil)
		require.False(t, got)
		require.Error(t, err)
	})
	t.Run("out of range index", func(t *testing.T) {
		got, err := match(t, `payload.items[5] == 1`, decode(t, `{"items": [1]}`))
		require.False(t, got)
		requireFilterError(t, err, `payload.items[5] == 1`, "index out of bounds")
	})
	t.Run("has() tests presence", func(t *testing.T) {
		for _, tt := range []struct {
			expr, payload string
			want          bool
		}{
			{`has(payload.order_id)`, `{}`, false},
			{`has(payload.order_id)`, `{"order_id": null}`, true},
			{`has(payload.order_id) && payload.order_id != null`, `{}`, false},
			{`has(payload.order_id) && payload.order_id != null`, `{"order_id": null}`, false},
			{`has(payload.order_id) && payload.order_id != null`, `{"order_id": "o1"}`, true},
			{`!has(payload.priority) || payload.priority == "high"`, `{}`, true},
			// An error on one side of || or && is ignored when the other side decides.
			{`payload.total > 100 || payload.vip == true`, `{"vip": true}`, true},
			{`payload.total > 100 && payload.vip == true`, `{"total": 5}`, false},
		} {
			got, err := match(t, tt.expr, decode(t, tt.payload))
			require.NoError(t, err, "%s on %s", tt.expr, tt.payload)
			require.Equal(t, tt.want, got, "%s on %s", tt.expr, tt.payload)
		}
	})
}

func TestTypeMismatch(t *testing.T) {
	for _, tt := range []struct{ expr, payload, want string }{
		{`payload.total > 100`, `{"total": "150"}`, "no such overload"},
		{`payload.total > 100`, `{"total": null}`, "no such overload"},
		{`payload.name.startsWith("a")`, `{"name": 5}`, "no such overload"},
		{`payload.total.amount > 1`, `{"total": 5}`, ""},
		{`payload[0] == 1`, `{"a": 1}`, "no such key"},
		{`payload.total / 0 == 1`, `{"total": 5}`, "division by zero"},
	} {
		got, err := match(t, tt.expr, decode(t, tt.payload))
		require.False(t, got, tt.expr)
		requireFilterError(t, err, tt.expr, tt.want)
	}
}

// nestedAll returns depth nested all() comprehensions over a 10-element list:
// 10^depth iterations.
func nestedAll(depth int) string {
	expr := "true"
	for i := range depth {
		expr = fmt.Sprintf("[0,1,2,3,4,5,6,7,8,9].all(v%d, %s)", i, expr)
	}
	return expr
}

func TestCostLimit(t *testing.T) {
	t.Run("cheap comprehension is fine", func(t *testing.T) {
		got, err := match(t, nestedAll(2), nil)
		require.NoError(t, err)
		require.True(t, got)
	})
	t.Run("nested comprehensions", func(t *testing.T) {
		expr := nestedAll(9) // 10^9 iterations if unchecked
		got, err := match(t, expr, nil)
		require.False(t, got)
		requireFilterError(t, err, expr, "cost limit exceeded")
	})
	t.Run("quadratic over a large payload list", func(t *testing.T) {
		items := make([]any, 5000)
		for i := range items {
			items[i] = json.Number(fmt.Sprint(i))
		}
		expr := `payload.items.all(x, payload.items.all(y, x + y >= 0))`
		got, err := match(t, expr, map[string]any{"items": items})
		require.False(t, got)
		requireFilterError(t, err, expr, "cost limit exceeded")
	})
	t.Run("building huge lists", func(t *testing.T) {
		expr := `[0,1,2,3,4,5,6,7,8,9].map(a, [0,1,2,3,4,5,6,7,8,9].map(b, [0,1,2,3,4,5,6,7,8,9].map(c,
			[0,1,2,3,4,5,6,7,8,9].map(d, [0,1,2,3,4,5,6,7,8,9].map(e, [0,1,2,3,4,5,6,7,8,9]))))).size() > 0`
		got, err := match(t, expr, nil)
		require.False(t, got)
		requireFilterError(t, err, expr, "cost limit exceeded")
	})
	t.Run("string scanning is charged by size", func(t *testing.T) {
		big := strings.Repeat("a", 1<<20)
		// Each contains() over 1 MiB costs about 10,500: a dozen exceed the limit.
		expr := `[1,2,3,4,5,6,7,8,9,10,11,12].exists(i, payload.s.contains("b"))`
		got, err := match(t, expr, map[string]any{"s": big})
		require.False(t, got)
		requireFilterError(t, err, expr, "cost limit exceeded")
	})
}

func TestMatchContextCancelled(t *testing.T) {
	items := make([]any, 1000)
	for i := range items {
		items[i] = float64(i)
	}
	f, err := Compile(`payload.items.all(x, x >= 0)`)
	require.NoError(t, err)
	ev := Event{Payload: map[string]any{"items": items}}

	got, err := f.MatchContext(context.Background(), ev)
	require.NoError(t, err)
	require.True(t, got)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err = f.MatchContext(ctx, ev)
	require.False(t, got)
	requireFilterError(t, err, f.String(), "context canceled")
}

func TestMatchDoesNotModifyPayload(t *testing.T) {
	payload := decode(t, `{"a": 1, "b": [2, {"c": 3.5}], "d": "x"}`)
	before, err := json.Marshal(payload)
	require.NoError(t, err)
	got, err := match(t, `payload.a == 1 && payload.b[0] == 2 && payload.b[1].c > 3`, payload)
	require.NoError(t, err)
	require.True(t, got)
	after, err := json.Marshal(payload)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))
	m := payload.(map[string]any)
	require.IsType(t, json.Number(""), m["a"])
	require.IsType(t, json.Number(""), m["b"].([]any)[0])
	require.IsType(t, json.Number(""), m["b"].([]any)[1].(map[string]any)["c"])
}

func TestNormalize(t *testing.T) {
	// Values without json.Number are returned as is, not copied.
	m := map[string]any{"a": 1.0, "b": []any{"x", true, nil}}
	out, err := normalize(m)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%p", m), fmt.Sprintf("%p", out))

	out, err = normalize(decode(t, `{"a": 1, "b": [2.5, {"c": -3}], "d": "x", "e": 1e2}`))
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"a": int64(1),
		"b": []any{2.5, map[string]any{"c": int64(-3)}},
		"d": "x",
		"e": 100.0,
	}, out)

	_, err = normalize(map[string]any{"a": []any{json.Number("x")}})
	require.ErrorContains(t, err, `"a": [0]: invalid number "x"`)
}

func TestString(t *testing.T) {
	const expr = `payload.total > 100`
	f, err := Compile(expr)
	require.NoError(t, err)
	require.Equal(t, expr, f.String())
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Expr: "a == 1", Msg: "boom"}
	require.Equal(t, `event filter "a == 1": boom`, e.Error())

	long := strings.Repeat("é", 200)
	msg := (&Error{Expr: long, Msg: "boom"}).Error()
	require.Contains(t, msg, `...": boom`)
	require.Less(t, len(msg), 200)
	require.True(t, strings.HasPrefix(msg, `event filter "éé`))
	require.NotContains(t, msg, `\x`) // not cut inside a UTF-8 sequence
}

func TestCached(t *testing.T) {
	const expr = `payload.cached_test_key == "v"`
	f1, err := Cached(expr)
	require.NoError(t, err)
	f2, err := Cached(expr)
	require.NoError(t, err)
	require.Same(t, f1, f2)

	f3, err := Cached(`payload.cached_test_key == "w"`)
	require.NoError(t, err)
	require.NotSame(t, f1, f3)

	// Compile errors are cached too.
	_, err1 := Cached(`payload.cached_test_key ==`)
	_, err2 := Cached(`payload.cached_test_key ==`)
	require.Error(t, err1)
	require.Same(t, err1, err2)

	// Too long: rejected, not cached.
	_, err = Cached(strings.Repeat("a", MaxExprBytes+1))
	require.ErrorContains(t, err, "longer than the limit")
}

func TestCacheEviction(t *testing.T) {
	c := newCache(2)
	a1, err := c.get(`payload.a == 1`)
	require.NoError(t, err)
	b1, err := c.get(`payload.b == 1`)
	require.NoError(t, err)
	a2, err := c.get(`payload.a == 1`) // a is now most recently used
	require.NoError(t, err)
	require.Same(t, a1, a2)
	_, err = c.get(`payload.c == 1`) // evicts b
	require.NoError(t, err)
	require.Equal(t, 2, c.ll.Len())
	require.Len(t, c.m, 2)

	a3, err := c.get(`payload.a == 1`)
	require.NoError(t, err)
	require.Same(t, a1, a3)
	b2, err := c.get(`payload.b == 1`)
	require.NoError(t, err)
	require.NotSame(t, b1, b2)
	require.Equal(t, 2, c.ll.Len())
}

func TestConcurrentMatch(t *testing.T) {
	exprs := []string{
		`payload.total > 100`,
		`payload.total > 100 && payload.priority == "high"`,
		`payload.shipping.region in ["US-CA", "US-NY"]`,
		`payload.items.exists(i, i.qty > 2)`,
	}
	payloads := []string{
		`{"total": 150, "priority": "high", "shipping": {"region": "US-CA"}, "items": [{"qty": 3}]}`,
		`{"total": 50.5, "priority": "low", "shipping": {"region": "EU-DE"}, "items": [{"qty": 1}]}`,
	}
	want := [][]bool{{true, false}, {true, false}, {true, false}, {true, false}}
	shared := make([]any, len(payloads)) // the same payload values are shared by all goroutines
	for i, p := range payloads {
		shared[i] = decode(t, p)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				ei, pi := (g+i)%len(exprs), i%len(payloads)
				f, err := Cached(exprs[ei])
				if err != nil {
					errs <- err
					return
				}
				got, err := f.Match(Event{ID: fmt.Sprint(g, i), Payload: shared[pi]})
				if err != nil {
					errs <- err
					return
				}
				if got != want[ei][pi] {
					errs <- fmt.Errorf("%s on %s: got %v", exprs[ei], payloads[pi], got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

var fuzzSeeds = []struct{ expr, payload string }{
	{`payload.total > 100`, `{"total": 150}`},
	{`payload.total > 100`, `{"total": 150.5}`},
	{`payload.customer_id == "cust_123"`, `{"customer_id": "cust_123"}`},
	{`payload.shipping.region in ["US-CA", "US-NY"]`, `{"shipping": {"region": "US-NY"}}`},
	{`payload.total > 100 && payload.priority == "high"`, `{"total": 101, "priority": "high"}`},
	{`payload.order_id != null`, `{"order_id": null}`},
	{`payload.order_id != null`, `{}`},
	{`has(payload.a) && payload.a.b[0] == 1.5`, `{"a": {"b": [1.5]}}`},
	{`payload.items.exists(i, i.qty > 2)`, `{"items": [{"qty": 3}, 4, "x", null]}`},
	{`event_type_id.startsWith("order.") && source == "shop"`, `[]`},
	{`payload.s.matches("^a+$")`, `{"s": "aaa"}`},
	{`payload`, `true`},
	{`payload.total +`, `{}`},
}

func FuzzCompileMatch(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.expr, s.payload)
	}
	f.Fuzz(func(t *testing.T, expr, payloadJSON string) {
		// Compile and Match must finish promptly (Match is bounded by CostLimit
		// and MaxEvalTime); crash with the input if they hang.
		watchdog := time.AfterFunc(10*time.Second, func() {
			panic(fmt.Sprintf("Compile/Match hung on expr %q, payload %q", expr, payloadJSON))
		})
		defer watchdog.Stop()
		var payload any
		dec := json.NewDecoder(bytes.NewReader([]byte(payloadJSON)))
		dec.UseNumber()
		if dec.Decode(&payload) != nil {
			payload = map[string]any{"raw": payloadJSON}
		}

		fl, err := Compile(expr)
		if err != nil {
			var fe *Error
			require.True(t, errors.As(err, &fe), "Compile error %T is not *Error", err)
			require.Nil(t, fl)
			require.NotContains(t, err.Error(), "internal error", "Compile panicked")
			return
		}
		require.Equal(t, expr, fl.String())
		got, err := fl.Match(Event{ID: "evt_1", TypeID: "order.created.v1", Source: "shop", Payload: payload})
		if err != nil {
			var fe *Error
			require.True(t, errors.As(err, &fe), "Match error %T is not *Error", err)
			require.False(t, got)
			require.NotContains(t, err.Error(), "internal error", "Match panicked")
		}
	})
}

func TestMatcherDecodesOnceAndRefusesBadPayloads(t *testing.T) {
	m := NewMatcher(Event{ID: "e1", TypeID: "t~", Source: "shop"}, json.RawMessage(`{"total": 250, "tags": ["a"]}`))
	require.True(t, m.Matches(""))
	require.True(t, m.Matches(`payload.total > 100 && source == "shop"`))
	require.False(t, m.Matches(`payload.total > 1000`))
	require.False(t, m.Matches(`payload.missing == 1`), "an evaluation error is no match")
	require.False(t, m.Matches(`payload.total >`), "a filter that does not compile is no match")
	for _, raw := range []string{`{"total": 250} {}`, `{"total":`, `nope`} {
		require.False(t, NewMatcher(Event{}, json.RawMessage(raw)).Matches(`true`), raw)
	}
	require.True(t, NewMatcher(Event{}, json.RawMessage(`{}`)).Matches(`true`))
}
