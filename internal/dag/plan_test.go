package dag_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/dag"
)

func TestRender(t *testing.T) {
	t.Parallel()
	outputs := map[string]json.RawMessage{
		"extract": json.RawMessage(`{"rows":42,"items":[{"id":"i-1","tags":["a"]}],"name":"sales","ok":true,"none":null}`),
		"raw":     json.RawMessage(`[1,2.50,3]`),
	}
	for _, c := range []struct{ params, want string }{
		{`{"rows":"{{tasks.extract.output.rows}}"}`, `{"rows":42}`},
		{`{"rows":"{{ tasks.extract.output.rows }}"}`, `{"rows":42}`},
		{`{"id":"{{tasks.extract.output.items[0].id}}"}`, `{"id":"i-1"}`},
		{`{"all":"{{tasks.extract.output}}"}`, `{"all":{"rows":42,"items":[{"id":"i-1","tags":["a"]}],"name":"sales","ok":true,"none":null}}`},
		{`{"tags":"{{tasks.extract.output.items[0].tags}}"}`, `{"tags":["a"]}`},
		{`{"n":"{{tasks.extract.output.none}}","ok":"{{tasks.extract.output.ok}}"}`, `{"n":null,"ok":true}`},
		{`{"s":"{{partition_key}}/{{tasks.extract.output.name}}/{{tasks.extract.output.rows}}"}`, `{"s":"2026-01-02/sales/42"}`},
		{`{"s":"items={{tasks.extract.output.items}}"}`, `{"s":"items=[{\"id\":\"i-1\",\"tags\":[\"a\"]}]"}`},
		{`{"n":"{{tasks.raw.output[1]}}","list":["{{partition_key}}",7]}`, `{"n":2.50,"list":["2026-01-02",7]}`},
		{`{"nested":{"deep":["x {{partition_key}}"]},"plain":"no placeholder"}`, `{"nested":{"deep":["x 2026-01-02"]},"plain":"no placeholder"}`},
	} {
		got, err := dag.Render(json.RawMessage(c.params), "2026-01-02", outputs)
		require.NoError(t, err, c.params)
		require.JSONEq(t, c.want, string(got), c.params)
		if strings.Contains(c.want, "2.50") {
			require.Contains(t, string(got), "2.50", "numbers are kept as written")
		}
	}
	for _, c := range []struct{ params, key, err string }{
		{`{"x":"{{tasks.x.output.items[0].id}}"}`, "k", `{{tasks.x.output.items[0].id}}: the output of task "x" is not available`},
		{`{"x":"{{tasks.extract.output.count}}"}`, "k", `tasks.extract.output.count: output has no member "count"`},
		{`{"x":"{{tasks.extract.output.items[3].id}}"}`, "k", `tasks.extract.output.items[3].id: output.items has 1 items, no index 3`},
		{`{"x":"{{tasks.extract.output.rows.n}}"}`, "k", `tasks.extract.output.rows.n: output.rows is number, not an object`},
		{`{"x":"{{tasks.extract.output.name[0]}}"}`, "k", `tasks.extract.output.name[0]: output.name is string, not an array`},
		{`{"x":"{{partition_key}}"}`, "", `{{partition_key}}: the run has no partition key`},
	} {
		_, err := dag.Render(json.RawMessage(c.params), c.key, outputs)
		require.EqualError(t, err, c.err)
	}
}

// diamond is a → (b, c) → d with a partition key and an upstream output in d's params.
func diamond(order []string, paramsD string) dag.Spec {
	byID := map[string]string{
		"a": task("a", `"params":{"day":"{{partition_key}}","region":"eu"}`, `"asset_key":"raw.a"`),
		"b": task("b", `"depends_on":["a"]`, `"checks":[{"type":"row_count","name":"rows","min":1}]`),
		"c": task("c", `"depends_on":["a"]`, `"retry":{"max_attempts":2}`),
		"d": task("d", `"depends_on":["c","b"]`, `"params":`+paramsD),
	}
	var tasks []string
	for _, id := range order {
		tasks = append(tasks, byID[id])
	}
	ws, issues := dag.Decode(spec(`{"type":"daily","start":"2026-01-01"}`, tasks...), nil)
	if len(issues) > 0 {
		panic(fmt.Sprint(issues))
	}
	return ws.Spec
}

// pin resolves every entrypoint to version 1.2.3 of it.
func pin(id string) (dag.Pinned, error) {
	return dag.Pinned{EntrypointID: strings.TrimSuffix(id, "v1~") + "v1.2~", Ref: "ep_1", Version: "1.2.3"}, nil
}

func TestPlan(t *testing.T) {
	t.Parallel()
	s := diamond([]string{"d", "c", "b", "a"}, `{"from_b":"{{tasks.b.output.rows}}","day":"{{partition_key}}"}`)
	p, err := dag.Plan(s, "2026-03-01", pin)
	require.NoError(t, err)
	var ids []string
	for _, pt := range p.Tasks {
		ids = append(ids, pt.ID)
	}
	require.Equal(t, []string{"a", "b", "c", "d"}, ids)
	require.Equal(t, "2026-03-01", p.PartitionKey)
	d, ok := p.Task("d")
	require.True(t, ok)
	require.Equal(t, []string{"b", "c"}, d.DependsOn)
	require.Equal(t, `{"day":"2026-03-01","from_b":"{{tasks.b.output.rows}}"}`, string(d.Params))
	require.Equal(t, strings.TrimSuffix(fnID, "v1~")+"v1.2~", d.EntrypointID)
	require.Equal(t, "ep_1", d.EntrypointRef)
	require.Equal(t, "1.2.3", d.Version)
	b, _ := p.Task("b")
	require.Equal(t, `{"min":1,"name":"rows","type":"row_count"}`, string(b.Checks[0]))
	c, _ := p.Task("c")
	require.Equal(t, 2, c.Retry.MaxAttempts)
	a, _ := p.Task("a")
	require.Equal(t, "raw.a", a.AssetKey)
	require.Equal(t, []string{}, a.DependsOn)

	// Rendering d's params once b has run.
	params, err := dag.Render(d.Params, p.PartitionKey, map[string]json.RawMessage{"b": json.RawMessage(`{"rows":[1,2]}`)})
	require.NoError(t, err)
	require.Equal(t, `{"day":"2026-03-01","from_b":[1,2]}`, string(params))

	_, err = dag.Plan(s, "", pin)
	require.ErrorIs(t, err, dag.ErrPartitionKey)
	_, err = dag.Plan(s, "2025-12-31", pin)
	require.ErrorIs(t, err, dag.ErrPartitionKey)
	unpartitioned := dag.Spec{Tasks: s.Tasks[1:3]}
	_, err = dag.Plan(unpartitioned, "2026-03-01", pin)
	require.ErrorIs(t, err, dag.ErrPartitionKey)

	gone := errors.New("not found")
	_, err = dag.Plan(s, "2026-03-01", func(string) (dag.Pinned, error) { return dag.Pinned{}, gone })
	require.ErrorIs(t, err, gone)
	require.EqualError(t, err, "task a: not found")
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	fp := func(s dag.Spec, key string) string {
		p, err := dag.Plan(s, key, pin)
		require.NoError(t, err)
		f, err := p.Fingerprint()
		require.NoError(t, err)
		require.Len(t, f, 64)
		return f
	}
	base := fp(diamond([]string{"a", "b", "c", "d"}, `{"x":1,"y":{"p":"{{partition_key}}","q":[1,2]}}`), "2026-03-01")
	// Reordered tasks, depends_on lists and object members: the same plan.
	require.Equal(t, base, fp(diamond([]string{"d", "b", "a", "c"}, `{"y":{"q":[1,2],"p":"{{partition_key}}"},"x":1}`), "2026-03-01"))
	require.Equal(t, base, fp(diamond([]string{"c", "d", "a", "b"}, `{ "y" : { "q" : [ 1 , 2 ], "p" : "{{ partition_key }}" } , "x" : 1 }`), "2026-03-01"))
	// A different key, param or pinned version: another plan.
	require.NotEqual(t, base, fp(diamond([]string{"a", "b", "c", "d"}, `{"x":1,"y":{"p":"{{partition_key}}","q":[1,2]}}`), "2026-03-02"))
	require.NotEqual(t, base, fp(diamond([]string{"a", "b", "c", "d"}, `{"x":2,"y":{"p":"{{partition_key}}","q":[1,2]}}`), "2026-03-01"))
	require.NotEqual(t, base, fp(diamond([]string{"a", "b", "c", "d"}, `{"x":1,"y":{"p":"{{partition_key}}","q":[2,1]}}`), "2026-03-01"))
	p, err := dag.Plan(diamond([]string{"a", "b", "c", "d"}, `{"x":1,"y":{"p":"{{partition_key}}","q":[1,2]}}`), "2026-03-01",
		func(id string) (dag.Pinned, error) { pn, _ := pin(id); pn.Version = "1.2.4"; return pn, nil })
	require.NoError(t, err)
	other, err := p.Fingerprint()
	require.NoError(t, err)
	require.NotEqual(t, base, other)
}
