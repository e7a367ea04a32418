package api_test

import (
	"fmt"

	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDAGConcurrentWideRuns: several wide DAG runs at once, their children ending while the runs'
// activations decide (on PostgreSQL's concurrent writers a child's end once took a running run's
// lease away): every run succeeds with every task.
func TestDAGConcurrentWideRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	src := "def main(ctx, input):\n    return {\"ok\": True}\n"
	f := e.registerActive(t, adm, invFn(t, "etl.noop.v1~", src))
	id := f["entrypoint_id"].(string)
	tasks := []any{dagTask("root", id, nil)}
	deps := []any{}
	for i := 0; i < 30; i++ {
		name := fmt.Sprintf("w%02d", i)
		tasks = append(tasks, dagTask(name, id, obj{"depends_on": []any{"root"}}))
		deps = append(deps, name)
	}
	tasks = append(tasks, dagTask("join", id, obj{"depends_on": deps}))
	body := dagBody(t, "wide.v1~", obj{"tasks": tasks})
	body["schema"] = obj{"params": obj{"type": "object"}}
	d := e.registerActive(t, adm, body)
	invDispatcher(t, e)
	var ids []string
	for i := 0; i < 6; i++ {
		r := invAsync(t, e, adm, d["entrypoint_id"].(string), obj{}, nil)
		ids = append(ids, r["invocation_id"].(string))
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, id := range ids {
		for {
			rec := invGet(t, e, adm, id)
			if rec["status"] == "succeeded" || rec["status"] == "failed" {
				require.Equal(t, "succeeded", rec["status"], "%v", rec)
				break
			}
			if time.Now().After(deadline) {
				tl := e.do(t, http.MethodGet, base+"/invocations/"+id+"/timeline?limit=200", adm, nil)
				items := tl.Body["items"].([]any)
				var types []string
				for _, it := range items {
					types = append(types, fmt.Sprint(it.(obj)["seq"], it.(obj)["event_type"]))
				}
				tk := e.do(t, http.MethodGet, base+"/invocations/"+id+"/tasks", adm, nil)
				states := map[string]int{}
				for _, it := range tk.Body["items"].([]any) {
					states[it.(obj)["state"].(string)]++
				}
				t.Fatalf("run %s is %v\n%v\n%v", id, rec["status"], types[len(types)-12:], states)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
