package api_test

// The `default`s of schema.params apply to every invocation — API starts (sync, async, dry run),
// r_invoke_v1 children and schedule runs — including inside objects present in the params and
// the elements of an array, and the recorded params show them.

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// echoParams is a params schema with defaults at the top level, inside an object and inside the
// elements of an array.
var echoParams = obj{"type": "object", "required": []any{"x"}, "properties": obj{
	"x":        obj{"type": "integer"},
	"greeting": obj{"type": "string", "default": "hello"},
	"opts": obj{"type": "object", "properties": obj{
		"level": obj{"type": "integer", "default": 3},
		"tags":  obj{"type": "array", "default": []any{"a"}},
	}},
	"lines": obj{"type": "array", "items": obj{"type": "object", "properties": obj{"qty": obj{"type": "integer", "default": 1}}}},
}}

func TestParamsDefaultsApplyEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	echo := e.registerActive(t, adm, invFn(t, "defaults.echo.v1~", "def main(ctx, input):\n  return input\n",
		set("schema.params", echoParams)))["entrypoint_id"].(string)

	given := obj{"x": 1, "opts": obj{"tags": []any{}}, "lines": []any{obj{}, obj{"qty": 5}}}
	want := obj{"x": 1.0, "greeting": "hello", "opts": obj{"level": 3.0, "tags": []any{}},
		"lines": []any{obj{"qty": 1.0}, obj{"qty": 5.0}}}
	// Without an optional object, its default-less parent stays absent: nothing to fill in.
	minimal := obj{"x": 2.0, "greeting": "hello"}

	t.Run("sync", func(t *testing.T) {
		rec := invSync(t, e, adm, echo, given, nil)
		require.Equal(t, "succeeded", rec["status"], "%v", rec)
		require.Equal(t, want, rec["result"], "the program's input has the defaults")
		require.Equal(t, want, rec["params"])
		require.Equal(t, want, invGet(t, e, adm, invID(rec))["params"], "the stored params have the defaults")
		rec = invSync(t, e, adm, echo, obj{"x": 2}, nil)
		require.Equal(t, minimal, rec["result"])
	})

	t.Run("async", func(t *testing.T) {
		rec := invAsync(t, e, adm, echo, given, nil)
		require.Equal(t, want, rec["params"])
		done := invWait(t, e, adm, invID(rec), wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, want, done["result"])
	})

	t.Run("dry run", func(t *testing.T) {
		rec, r := invCall(t, e, adm, http.StatusOK, obj{"entrypoint_id": echo, "mode": "sync", "params": given, "dry_run": true}, nil)
		require.Equal(t, true, r.Body["dry_run"])
		require.Equal(t, want, rec["params"])
	})

	t.Run("a default that does not match the schema is a validation error", func(t *testing.T) {
		bad := e.registerActive(t, adm, invFn(t, "defaults.bad.v1~", "def main(ctx, input):\n  return input\n",
			set("schema.params", obj{"type": "object", "properties": obj{"n": obj{"type": "integer", "default": "ten"}}})))["entrypoint_id"].(string)
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, invPath, adm,
			obj{"entrypoint_id": bad, "mode": "sync", "params": obj{}})
		require.NotNil(t, issueAt(r, "$.params.n"), "%s", r)
	})

	t.Run("r_invoke_v1 child", func(t *testing.T) {
		parent := e.registerActive(t, adm, invFn(t, "defaults.parent.v1~", fmt.Sprintf(
			"def main(ctx, input):\n  r = r_await(r_invoke_v1(%q, {\"x\": 7, \"lines\": [{}]}, timeout_ms=5000))\n  return {\"ok\": r.ok, \"value\": r.value}\n", echo)))
		rec := invSync(t, e, adm, parent["entrypoint_id"].(string), obj{}, nil)
		require.Equal(t, "succeeded", rec["status"], "%v", rec)
		childWant := obj{"x": 7.0, "greeting": "hello", "lines": []any{obj{"qty": 1.0}}}
		require.Equal(t, obj{"ok": true, "value": childWant}, rec["result"])
		var kids []obj
		for _, it := range e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+query("$filter", "entrypoint_id eq '"+echo+"'", "limit", "100").Encode(), adm, nil).items() {
			if it["parent_invocation_id"] == invID(rec) {
				kids = append(kids, it)
			}
		}
		require.Len(t, kids, 1)
		require.Equal(t, childWant, kids[0]["params"], "the child's stored params have the defaults")
	})

	t.Run("schedule", func(t *testing.T) {
		e.expect(t, http.StatusCreated, http.MethodPost, schPath, adm, obj{"schedule_id": "echo-defaults", "entrypoint_id": echo,
			"expression": obj{"kind": "cron", "value": "0 2 * * *"}, "input_overrides": obj{"x": 3, "opts": obj{}}})
		tr := e.expect(t, http.StatusAccepted, http.MethodPost, schPath+"/echo-defaults:trigger", adm, obj{}).Body
		schedWant := obj{"x": 3.0, "greeting": "hello", "opts": obj{"level": 3.0, "tags": []any{"a"}}}
		require.Equal(t, schedWant, tr["params"], "%v", tr)
		id := tr["invocation"].(obj)["invocation_id"].(string)
		done := invWait(t, e, adm, id, wfTerminal...)
		require.Equal(t, "succeeded", done["status"], "%v", done)
		require.Equal(t, schedWant, done["params"])
		require.Equal(t, schedWant, done["result"])
	})
}
