package dagrun

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/dag"
)

// planned is a run's plan as its dag_planned event records it: the plan, its fingerprint and its
// JSON, with what each task's entrypoint id resolved to when it was made.
type planned struct {
	plan        dag.RunPlan
	fingerprint string
	raw         json.RawMessage
	resolved    map[string]string // task entrypoint id as written → version ref
}

// newPlanned plans d's DAG for partitionKey, resolving the tasks' entrypoints with resolve.
func newPlanned(d catalog.Definition, partitionKey string, resolve func(string) (dag.Pinned, error)) (planned, error) {
	ws, issues := dag.Decode(d.Implementation.WorkflowSpec, dag.BasicChecks)
	if len(issues) > 0 {
		return planned{}, fmt.Errorf("the DAG does not validate: %s: %s", issues[0].Path, issues[0].Message)
	}
	m := planned{resolved: map[string]string{}}
	p, err := dag.Plan(ws.Spec, partitionKey, func(id string) (dag.Pinned, error) {
		pin, err := resolve(id)
		m.resolved[id] = pin.Ref
		return pin, err
	})
	if err != nil {
		return m, err
	}
	if m.fingerprint, err = p.Fingerprint(); err != nil {
		return m, err
	}
	m.plan = p
	m.raw, err = json.Marshal(p)
	return m, err
}

// planKey names the plans that are the same while the tasks' entrypoints resolve the same: a DAG
// version (its ref), a partition and the subject the entrypoints are resolved for.
type planKey struct{ ref, partition, tenant, subject string }

// planMemo keeps the plans made in this process, so that the runs of one DAG version for one
// partition (a backfill's retries, a schedule's runs of a static partition, a benchmark) skip
// decoding the spec, planning and fingerprinting again. A plan is reused only when every task's
// entrypoint still resolves to the version it pinned: activating a new version makes a new plan.
type planMemo struct {
	mu sync.Mutex
	m  map[planKey]planned
}

// planMemoMax bounds the plans kept (reaching it empties the memo).
const planMemoMax = 1024

// get returns the plan kept under k when resolve still gives every task's entrypoint the version
// it pinned.
func (c *planMemo) get(k planKey, resolve func(string) (dag.Pinned, error)) (planned, bool) {
	c.mu.Lock()
	m, ok := c.m[k]
	c.mu.Unlock()
	if !ok {
		return m, false
	}
	for id, ref := range m.resolved {
		if pin, err := resolve(id); err != nil || pin.Ref != ref {
			return m, false
		}
	}
	return m, true
}

// put keeps m under k.
func (c *planMemo) put(k planKey, m planned) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= planMemoMax {
		c.m = map[planKey]planned{}
	}
	c.m[k] = m
}
