package dag_test

import (
	"encoding/json"
	"fmt"

	"github.com/larkrun/lark/internal/dag"
)

// A daily DAG of two tasks planned for one day: clean runs after extract and reads its output,
// which stays a placeholder until extract has run.
func ExamplePlan() {
	raw := json.RawMessage(`{"format": "dag", "spec": {
	  "partitioning": {"type": "daily", "start": "2026-01-01", "timezone": "UTC"},
	  "tasks": [
	    {"id": "clean", "entrypoint_id": "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.etl.sales.clean.v1~",
	     "depends_on": ["extract"], "params": {"rows": "{{tasks.extract.output.rows}}"}, "asset_key": "sales.clean"},
	    {"id": "extract", "entrypoint_id": "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.etl.sales.extract.v1~",
	     "params": {"day": "{{partition_key}}"}}
	  ]}}`)
	ws, issues := dag.Decode(raw, nil)
	if len(issues) > 0 {
		fmt.Println(issues)
		return
	}
	// The registry pins each task to a version visible to the caller; here every id is v1.0.
	resolve := func(id string) (dag.Pinned, error) {
		return dag.Pinned{EntrypointID: id[:len(id)-1] + ".0~", Ref: "ep_" + id[len(id)-12:len(id)-4], Version: "1.0.0"}, nil
	}
	plan, err := dag.Plan(ws.Spec, "2026-03-01", resolve)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range plan.Tasks {
		fmt.Println(t.ID, t.Version, t.DependsOn, string(t.Params))
	}
	fp, _ := plan.Fingerprint()
	fmt.Println(len(fp), "hex digits")

	params, _ := dag.Render(plan.Tasks[1].Params, plan.PartitionKey, map[string]json.RawMessage{"extract": json.RawMessage(`{"rows": 1200}`)})
	fmt.Println(string(params))
	// Output:
	// extract 1.0.0 [] {"day":"2026-03-01"}
	// clean 1.0.0 [extract] {"rows":"{{tasks.extract.output.rows}}"}
	// 64 hex digits
	// {"rows":1200}
}
