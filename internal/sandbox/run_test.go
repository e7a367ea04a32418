package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeHost records logs and answers HTTP and Invoke calls with functions.
type fakeHost struct {
	mu     sync.Mutex
	logs   []logEntry
	now    time.Time
	http   func(ctx context.Context, req HTTPRequest) (HTTPResponse, error)
	invoke func(ctx context.Context, req InvokeRequest) (InvokeResult, error)
	reqs   []HTTPRequest
}

type logEntry struct {
	Msg    string
	Fields map[string]any
}

func (h *fakeHost) HTTP(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
	h.mu.Lock()
	h.reqs = append(h.reqs, req)
	f := h.http
	h.mu.Unlock()
	if f == nil {
		return HTTPResponse{StatusCode: 200, Body: []byte(`{}`)}, nil
	}
	return f(ctx, req)
}

func (h *fakeHost) Invoke(ctx context.Context, req InvokeRequest) (InvokeResult, error) {
	if h.invoke == nil {
		return InvokeResult{OK: true, Value: map[string]any{"echo": req.Params}}, nil
	}
	return h.invoke(ctx, req)
}

func (h *fakeHost) Log(_ context.Context, msg string, fields map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, logEntry{msg, fields})
}

func (h *fakeHost) Now() time.Time {
	if h.now.IsZero() {
		return time.Date(2025, 3, 4, 5, 6, 7, 890_000_000, time.FixedZone("X", 3600))
	}
	return h.now
}

func (h *fakeHost) requests() []HTTPRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HTTPRequest(nil), h.reqs...)
}

var testInfo = Info{InvocationID: "inv-1", TenantID: "t-1", EntrypointID: "ep-1", CorrelationID: "corr-1", Attempt: 2}

// exec compiles src and runs it with input and limits on host h (a new
// fakeHost if nil).
func exec(t testing.TB, src string, input any, limits Limits, h Host) (Result, *Error) {
	t.Helper()
	prog, err := Compile("test.star", src)
	require.NoError(t, err)
	if h == nil {
		h = &fakeHost{}
	}
	return Run(context.Background(), Request{Program: prog, Input: input, Info: testInfo, Limits: limits, Host: h})
}

// jsonInput decodes s as the platform does (UseNumber).
func jsonInput(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

func num(t testing.TB, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	require.True(t, ok, "%T %v is not a json.Number", v, v)
	f, err := n.Float64()
	require.NoError(t, err)
	return f
}

func TestRunCalculateTax(t *testing.T) {
	res, rerr := exec(t, calculateTax, jsonInput(t, `{"amount": 100}`), Limits{}, nil)
	require.Nil(t, rerr)
	out := res.Output.(map[string]any)
	require.InDelta(t, 10, num(t, out["tax"]), 1e-9)
	require.InDelta(t, 110, num(t, out["total"]), 1e-9)
	require.Positive(t, res.Steps)
	require.Positive(t, res.MaxMemoryBytes)
	require.Positive(t, res.Duration)

	// float64 input (json.Unmarshal without UseNumber) works the same.
	res, rerr = exec(t, calculateTax, map[string]any{"amount": 100.0}, Limits{}, nil)
	require.Nil(t, rerr)
	require.InDelta(t, 110, num(t, res.Output.(map[string]any)["total"]), 1e-9)
}

func TestRunObjectAccess(t *testing.T) {
	input := jsonInput(t, `{
		"customer_id": "c-42",
		"odd-key": 7,
		"nested": {"a": {"b": [1, 2, {"c": true}]}},
		"items": [{"sku": "x", "qty": 2}, {"sku": "y", "qty": 3}],
		"empty": {}
	}`)
	src := fn(
		`  n = input.nested`,
		`  out = {}`,
		`  out["attr"] = input.customer_id`,
		`  out["index"] = input["customer_id"]`,
		`  out["odd"] = input["odd-key"]`,
		`  out["getattr_odd"] = getattr(input, "odd-key", "none")`,
		`  out["nested_attr"] = n.a.b[2].c`,
		`  out["nested_index"] = input["nested"]["a"]["b"][1]`,
		`  out["get"] = input.get("customer_id")`,
		`  out["get_missing"] = input.get("missing", "dflt")`,
		`  out["get_none"] = input.get("missing")`,
		`  out["in"] = "customer_id" in input`,
		`  out["not_in"] = "missing" in input`,
		`  out["int_not_in"] = 1 in input`,
		`  out["len"] = len(input)`,
		`  out["iter"] = [k for k in input]`,
		`  out["keys"] = input.keys()`,
		`  out["values_len"] = len(input.values())`,
		`  out["items_field"] = [i.sku for i in input.items]`,
		`  out["qty"] = sum_qty(input["items"])`,
		`  out["type"] = type(input)`,
		`  out["hasattr"] = [hasattr(input, "customer_id"), hasattr(input, "odd-key"), hasattr(input, "nope")]`,
		`  out["empty_truth"] = bool(input.empty)`,
		`  out["eq"] = input.nested == input.nested`,
		`  out["json"] = json.encode(input.nested)`,
		`  out["str"] = str(input.nested.a)`,
		`  out["dict"] = dict(input.nested.a)["b"][0]`,
		`  out["dir_has_get"] = "get" in dir(input)`,
		`  out["items_pairs"] = [k for k, v in input.nested.items()]`,
		`  return out`,
	) + "def sum_qty(items):\n  t = 0\n  for i in items:\n    t += i.qty\n  return t\n"
	res, rerr := exec(t, src, input, Limits{}, nil)
	require.Nil(t, rerr, "%v", rerr)
	out := res.Output.(map[string]any)
	want := map[string]any{
		"attr": "c-42", "index": "c-42", "odd": json.Number("7"), "getattr_odd": json.Number("7"),
		"nested_attr": true, "nested_index": json.Number("2"), "get": "c-42", "get_missing": "dflt", "get_none": nil,
		"in": true, "not_in": false, "int_not_in": false, "len": json.Number("5"),
		"iter":        []any{"customer_id", "empty", "items", "nested", "odd-key"},
		"keys":        []any{"customer_id", "empty", "items", "nested", "odd-key"},
		"values_len":  json.Number("5"),
		"items_field": []any{"x", "y"}, "qty": json.Number("5"), "type": "object",
		"hasattr":     []any{true, true, false},
		"empty_truth": false, "eq": true,
		"json": `{"a":{"b":[1,2,{"c":true}]}}`,
		"str":  `{"b": [1, 2, {"c": True}]}`,
		"dict": json.Number("1"), "dir_has_get": true,
		"items_pairs": []any{"a"},
	}
	require.Equal(t, want, out)

	// Input is immutable.
	for _, body := range []string{`  input.items.append(1)`, `  input["x"] = 1`, `  input.x = 1`} {
		_, rerr := exec(t, fn(body), input, Limits{}, nil)
		require.NotNil(t, rerr, body)
		require.Equal(t, ErrRuntime, rerr.TypeID, body)
	}
	// A missing attribute is an error with a hint.
	_, rerr = exec(t, fn(`  return input.customer`), input, Limits{}, nil)
	require.NotNil(t, rerr)
	require.Contains(t, rerr.Message, "customer_id")
}

func TestRunInputConversion(t *testing.T) {
	tests := []struct {
		name  string
		input any
		expr  string // evaluated with input bound
		want  any
	}{
		{"json int", jsonInput(t, `{"n": 12}`), `type(input.n)`, "int"},
		{"json integral float", jsonInput(t, `{"n": 12.0}`), `type(input.n)`, "int"},
		{"json exponent", jsonInput(t, `{"n": 1e3}`), `input.n + 1`, json.Number("1001")},
		{"json fraction", jsonInput(t, `{"n": 1.5}`), `type(input.n)`, "float"},
		{"json big int", jsonInput(t, `{"n": 123456789012345678901234567890}`), `input.n + 1`, json.Number("123456789012345678901234567891")},
		{"json negative", jsonInput(t, `{"n": -3}`), `input.n * 2`, json.Number("-6")},
		{"float64 integral", map[string]any{"n": 3.0}, `type(input.n)`, "int"},
		{"float64 fraction", map[string]any{"n": 0.25}, `input.n * 4`, json.Number("1")},
		{"go int", map[string]any{"n": 7}, `input.n`, json.Number("7")},
		{"top-level list", []any{"a", "b"}, `input[1]`, "b"},
		{"top-level string", "hello", `input.upper()`, "HELLO"},
		{"null", nil, `input == None`, true},
		{"map of strings", map[string]string{"k": "v"}, `input.k`, "v"},
		{"slice of ints", []int{1, 2, 3}, `len(input)`, json.Number("3")},
		{"nested lists", jsonInput(t, `[[1, [2]], []]`), `input[0][1][0]`, json.Number("2")},
		{"keys sorted", map[string]any{"b": 1, "a": 2}, `list(input)`, []any{"a", "b"}},
		{"raw message", json.RawMessage(`{"a": {"b": 2.0}}`), `input.a.b`, json.Number("2")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, rerr := exec(t, fn("  return "+tt.expr), tt.input, Limits{}, nil)
			require.Nil(t, rerr, "%v", rerr)
			require.Equal(t, tt.want, res.Output)
		})
	}

	_, rerr := exec(t, fn("  return 1"), map[string]any{"c": make(chan int)}, Limits{}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrValidation, rerr.TypeID)
	require.Equal(t, CategoryNonRetryable, rerr.Category)
}

func TestRunOutputConversion(t *testing.T) {
	tests := []struct {
		name string
		body []string
		want any
	}{
		{"none", []string{"  return None"}, nil},
		{"implicit none", []string{"  pass"}, nil},
		{"bool", []string{"  return True"}, true},
		{"int", []string{"  return -5"}, json.Number("-5")},
		{"big int", []string{"  return 1 << 100"}, json.Number("1267650600228229401496703205376")},
		{"float", []string{"  return 0.5"}, json.Number("0.5")},
		{"string", []string{`  return "é"`}, "é"},
		{"list", []string{`  return [1, "a", None]`}, []any{json.Number("1"), "a", nil}},
		{"tuple", []string{`  return (1, 2)`}, []any{json.Number("1"), json.Number("2")}},
		{"dict", []string{`  return {"a": {"b": [True]}}`}, map[string]any{"a": map[string]any{"b": []any{true}}}},
		{"struct", []string{`  return struct(x=1, y=struct(z="w"))`}, map[string]any{"x": json.Number("1"), "y": map[string]any{"z": "w"}}},
		{"object", []string{`  return input`}, map[string]any{"k": []any{json.Number("1")}}},
		{"json round trip", []string{`  return json.decode(json.encode({"a": [1, 2.5]}))`}, map[string]any{"a": []any{json.Number("1"), json.Number("2.5")}}},
		{"math", []string{`  return math.floor(2.7)`}, json.Number("2")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, rerr := exec(t, fn(tt.body...), jsonInput(t, `{"k": [1]}`), Limits{}, nil)
			require.Nil(t, rerr, "%v", rerr)
			require.Equal(t, tt.want, res.Output)
		})
	}

	errs := []struct {
		name string
		body []string
		line int
		path string
	}{
		{"set", []string{"  x = 1", "  return set([1])"}, 3, "$"},
		{"function", []string{"  return main"}, 2, "$"},
		{"bytes", []string{`  return b"x"`}, 2, "$"},
		{"int key", []string{`  return {1: 2}`}, 2, "$"},
		{"nan", []string{`  return {"a": [float("nan")]}`}, 2, "$.a[0]"},
		{"inf", []string{`  return struct(odd=float("inf"))`}, 2, "$.odd"},
		{"nested range", []string{`  return {"a b": [1, range(3)]}`}, 2, `$["a b"][1]`},
		{"cycle", []string{"  l = []", "  l.append(l)", "  return l"}, 4, ""},
		{"which return", []string{"  if input.k:", "    return {1: 1}", "  return 1"}, 3, "$"},
	}
	for _, tt := range errs {
		t.Run("error "+tt.name, func(t *testing.T) {
			_, rerr := exec(t, fn(tt.body...), jsonInput(t, `{"k": [1]}`), Limits{}, nil)
			require.NotNil(t, rerr)
			require.Equal(t, ErrRuntime, rerr.TypeID)
			require.Equal(t, CategoryRetryable, rerr.Category)
			require.Contains(t, rerr.Message, "cannot be converted to JSON")
			require.Equal(t, tt.line, rerr.Details["line"], "%+v", rerr)
			if tt.path != "" {
				require.Equal(t, tt.path, rerr.Details["path"])
			}
		})
	}
}

func TestRunContext(t *testing.T) {
	h := &fakeHost{}
	src := fn(
		`  ctx.log("hello", n=1, items=[1, "a"], bad=set([1]))`,
		`  ctx.log(42)`,
		`  print("printed", 1, [2])`,
		`  return [ctx.invocation_id, ctx.tenant_id, ctx.entrypoint_id, ctx.attempt, ctx.correlation_id, type(ctx), hasattr(ctx, "log")]`,
	)
	res, rerr := exec(t, src, nil, Limits{}, h)
	require.Nil(t, rerr, "%v", rerr)
	require.Equal(t, []any{"inv-1", "t-1", "ep-1", json.Number("2"), "corr-1", "context", true}, res.Output)
	require.Equal(t, []logEntry{
		{"hello", map[string]any{"n": json.Number("1"), "items": []any{json.Number("1"), "a"}, "bad": "set([1])"}},
		{"42", nil},
		{"printed 1 [2]", nil},
	}, h.logs)

	_, rerr = exec(t, fn(`  ctx.log()`), nil, Limits{}, h)
	require.NotNil(t, rerr)
	require.Equal(t, ErrRuntime, rerr.TypeID)
}

func TestRunFail(t *testing.T) {
	src := "def helper(x):\n  fail(\"boom:\", x)\n\ndef main(ctx, input):\n  return helper(1)\n"
	_, rerr := exec(t, src, nil, Limits{}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrRuntime, rerr.TypeID)
	require.Equal(t, CategoryRetryable, rerr.Category)
	require.Equal(t, "fail: boom: 1", rerr.Message)
	require.Equal(t, 2, rerr.Details["line"])
	require.Equal(t, 7, rerr.Details["column"])
	bt := rerr.Details["backtrace"].(string)
	require.Contains(t, bt, "test.star:5:16: in main")
	require.Contains(t, bt, "test.star:2:7: in helper")
	require.Contains(t, bt, "Error in fail: fail: boom: 1")
	require.Equal(t, "runtime: fail: boom: 1", rerr.Error())

	// Any evaluation error is a runtime error with a position.
	_, rerr = exec(t, fn("  x = 1", "  return x // 0"), nil, Limits{}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrRuntime, rerr.TypeID)
	require.Equal(t, 3, rerr.Details["line"])
	require.Contains(t, rerr.Message, "division by zero")

	// Errors at top level too.
	_, rerr = exec(t, "X = {}[1]\n"+calculateTax, nil, Limits{}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, 1, rerr.Details["line"])
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		msg  string
	}{
		{"syntax", "def main(ctx, input):\n  return {\"tax\": input.x * }\n", 2, "syntax error"},
		{"undefined", fn("  return foo"), 2, "undefined: foo"},
		{"workflow helper", fn("  r_sleep(10)"), 2, "undefined: r_sleep"},
		{"load", "load(\"x.star\", \"y\")\n" + calculateTax, 1, "load() is not allowed"},
		{"no main", "def handler(ctx, input):\n  pass\n", 0, "no top-level main"},
		{"bad main", "def main(ctx):\n  pass\n", 1, "exactly two"},
		{"too large", calculateTax + strings.Repeat("#", MaxSourceBytes), 0, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog, err := Compile("test.star", tt.src)
			require.Nil(t, prog)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, ErrValidation, e.TypeID)
			require.Equal(t, CategoryNonRetryable, e.Category)
			require.Contains(t, e.Message, tt.msg)
			if tt.line > 0 {
				require.Equal(t, tt.line, e.Details["line"])
			}
		})
	}
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	a1, err := c.Get("a", "a.star", calculateTax)
	require.NoError(t, err)
	a2, err := c.Get("a", "a.star", calculateTax)
	require.NoError(t, err)
	require.Same(t, a1, a2)
	require.Equal(t, "a.star", a1.Filename())

	_, err = c.Get("bad", "b.star", "def main(:")
	require.Error(t, err)
	_, err2 := c.Get("bad", "b.star", "def main(:")
	require.Equal(t, err, err2, "errors are cached")

	// a is the most recently used of a and bad: adding c evicts bad.
	_, err = c.Get("a", "a.star", calculateTax)
	require.NoError(t, err)
	_, err = c.Get("c", "c.star", calculateTax)
	require.NoError(t, err)
	require.Equal(t, 2, c.Len())
	a3, _ := c.Get("a", "a.star", calculateTax)
	require.Same(t, a1, a3)

	// Same key, new source: recompiled.
	a4, err := c.Get("a", "a.star", fn("  return 2"))
	require.NoError(t, err)
	require.NotSame(t, a1, a4)
	res, rerr := Run(context.Background(), Request{Program: a4, Host: &fakeHost{}})
	require.Nil(t, rerr)
	require.Equal(t, json.Number("2"), res.Output)

	// Concurrent misses compile once.
	c = NewCache(0)
	var wg sync.WaitGroup
	progs := make([]*Program, 16)
	for i := range progs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.Get("k", "k.star", calculateTax)
			require.NoError(t, err)
			progs[i] = p
		}()
	}
	wg.Wait()
	for _, p := range progs {
		require.Same(t, progs[0], p)
	}
}

func TestRunProgramConcurrently(t *testing.T) {
	prog, err := Compile("tax.star", "COUNT = [0]\n"+fn("  COUNT[0] += 1", "  return {\"n\": COUNT[0], \"tax\": input.amount * 0.1}"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, rerr := Run(context.Background(), Request{Program: prog, Input: map[string]any{"amount": i}, Host: &fakeHost{}})
			require.Nil(t, rerr)
			out := res.Output.(map[string]any)
			require.Equal(t, json.Number("1"), out["n"], "globals are per execution")
			require.InDelta(t, float64(i)*0.1, num(t, out["tax"]), 1e-9)
		}()
	}
	wg.Wait()
}

func TestRunRequestValidation(t *testing.T) {
	prog, err := Compile("t.star", calculateTax)
	require.NoError(t, err)
	for _, req := range []Request{
		{Host: &fakeHost{}},
		{Program: prog},
		{Program: prog, Host: &fakeHost{}, Limits: Limits{CPU: 2}},
		{Program: prog, Host: &fakeHost{}, Limits: Limits{CPU: 0.01}},
		{Program: prog, Host: &fakeHost{}, Limits: Limits{MemoryMB: 513}},
		{Program: prog, Host: &fakeHost{}, Limits: Limits{MemoryMB: -1}},
		{Program: prog, Host: &fakeHost{}, Limits: Limits{Timeout: -time.Second}},
	} {
		_, rerr := Run(context.Background(), req)
		require.NotNil(t, rerr)
		require.Equal(t, ErrValidation, rerr.TypeID)
	}
}

func TestRuntimePredeclaredNames(t *testing.T) {
	names := RuntimePredeclaredNames()
	for _, name := range names {
		require.True(t, IsPredeclared(name), name)
	}
	var want []string
	for _, h := range Helpers() {
		if !h.WorkflowOnly && h.Unavailable == "" {
			want = append(want, h.Name)
		}
	}
	var got []string
	for _, name := range names {
		if strings.HasPrefix(name, "r_") {
			got = append(got, name)
		}
	}
	require.ElementsMatch(t, want, got)
	for _, name := range []string{"struct", "json", "math", "len"} {
		require.Contains(t, names, name)
	}
	for _, name := range []string{"r_sleep", "r_step_v1", "load"} {
		require.NotContains(t, names, name)
	}
	for name := range helperImpls {
		require.Contains(t, names, name)
	}
}
