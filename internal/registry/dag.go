package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/dag"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/quality"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
)

// CodeTaskEntrypoint is the finding of a DAG task whose entrypoint_id is not a callable function
// visible to the caller.
const CodeTaskEntrypoint = "TASK_ENTRYPOINT"

// errTaskEntrypoint marks a task entrypoint that cannot run (its message says why).
var errTaskEntrypoint = errors.New("task entrypoint")

// checkDAG validates a DAG workflow's implementation.workflow_spec (package dag, its quality checks
// by package quality) and checks that each task's entrypoint_id names a callable function the
// caller can see.
func (s *Service) checkDAG(ctx context.Context, sc auth.SecurityContext, impl map[string]any, r *Report) error {
	raw, ok := impl["workflow_spec"].(map[string]any)
	if !ok || impl["kind"] != "workflow_spec" {
		return nil // reported by the schema
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	ws, issues := dag.Decode(b, qualityChecks)
	for _, is := range issues {
		r.fail(is.Code, is.Path, is.Message)
	}
	pinned := map[string]error{}
	for i, t := range ws.Spec.Tasks {
		if t.EntrypointID == "" {
			continue
		}
		err, seen := pinned[t.EntrypointID]
		if !seen {
			_, err = s.taskEntrypoint(ctx, sc, t.EntrypointID)
			pinned[t.EntrypointID] = err
		}
		switch {
		case errors.Is(err, errTaskEntrypoint):
			r.fail(CodeTaskEntrypoint, fmt.Sprintf("%s.spec.tasks[%d].entrypoint_id", dag.Root, i), strings.TrimSuffix(err.Error(), ": "+errTaskEntrypoint.Error()))
		case err != nil:
			return err
		}
	}
	return nil
}

// taskEntrypoint resolves a DAG task's entrypoint_id for the caller (an exact or opaque id pins
// that version; a major-only id the latest active minor). It must be a function, active or
// deprecated; otherwise the error wraps errTaskEntrypoint and says why.
func (s *Service) taskEntrypoint(ctx context.Context, sc auth.SecurityContext, id string) (entrypoint.Entrypoint, error) {
	e, err := s.resolve(ctx, sc, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return e, fmt.Errorf("entrypoint %s does not exist or is not visible to you (or has no active version): %w", id, errTaskEntrypoint)
	case err != nil:
		return e, err
	case e.Kind != entrypoint.KindFunction:
		return e, fmt.Errorf("entrypoint %s is a workflow; a DAG task runs a function (workflows and DAGs as tasks are not supported in this version): %w", e.GTSID, errTaskEntrypoint)
	case !e.Status.Callable():
		return e, fmt.Errorf("entrypoint %s is %s; a DAG task's function must be active or deprecated: %w", e.GTSID, e.Status, errTaskEntrypoint)
	}
	return e, nil
}

// PlanRequest is the body of POST /entrypoints/{id}:plan.
type PlanRequest struct {
	// PartitionKey is the partition to plan: required when the DAG is partitioned, absent when it
	// is not.
	PartitionKey string `json:"partition_key,omitempty"`
}

// PlanResult is the answer of POST /entrypoints/{id}:plan.
type PlanResult struct {
	// Fingerprint is the hex SHA-256 of the plan's canonical JSON (004 §15).
	Fingerprint string `json:"fingerprint"`
	// Plan is what a run for the partition would do.
	Plan dag.RunPlan `json:"plan"`
}

// Plan plans a run of a DAG entrypoint for a partition key (POST /entrypoints/{id}:plan): its tasks
// in a stable topological order, each pinned to the version of its function the caller would run
// now, with the plan's fingerprint. 404 when the caller cannot see the entrypoint; 409 not_a_dag
// when it is not a DAG, task_not_callable when a task's function can no longer run; 422 for a
// partition key the partitioning does not have.
func (s *Service) Plan(ctx context.Context, sc auth.SecurityContext, id string, req PlanRequest) (PlanResult, error) {
	if !sc.Has(auth.RoleDeveloper) {
		return PlanResult{}, problem.Forbidden("planning DAGs needs the developer role")
	}
	e, err := s.Get(ctx, sc, id)
	if err != nil {
		return PlanResult{}, err
	}
	spec, err := storedSpec(e)
	if err != nil {
		return PlanResult{}, err
	}
	plan, err := dag.Plan(spec, req.PartitionKey, func(eid string) (dag.Pinned, error) {
		t, err := s.taskEntrypoint(ctx, sc, eid)
		return dag.Pinned{EntrypointID: t.GTSID, Ref: t.ID, Version: t.Version}, err
	})
	switch {
	case errors.Is(err, dag.ErrPartitionKey):
		code := "INVALID_VALUE"
		if req.PartitionKey == "" {
			code = "MISSING_FIELD"
		}
		return PlanResult{}, problem.Validation(err.Error(), []problem.Issue{{Path: "$.partition_key", Code: code, Message: err.Error()}})
	case errors.Is(err, errTaskEntrypoint):
		return PlanResult{}, problem.Conflict("task_not_callable", "%s", strings.TrimSuffix(err.Error(), ": "+errTaskEntrypoint.Error()))
	case err != nil:
		return PlanResult{}, problem.Internal(err)
	}
	fp, err := plan.Fingerprint()
	if err != nil {
		return PlanResult{}, problem.Internal(err)
	}
	return PlanResult{Fingerprint: fp, Plan: plan}, nil
}

// storedSpec is the DAG spec of a stored entrypoint; 409 not_a_dag for any other entrypoint.
func storedSpec(e entrypoint.Entrypoint) (dag.Spec, error) {
	if e.Adapter != schema.DAGAdapter {
		return dag.Spec{}, problem.Conflict("not_a_dag", "entrypoint %s is not a DAG (adapter %s); only DAGs (adapter %s) have a plan", e.GTSID, e.Adapter, schema.DAGAdapter)
	}
	var def struct {
		Implementation struct {
			WorkflowSpec json.RawMessage `json:"workflow_spec"`
		} `json:"implementation"`
	}
	if err := json.Unmarshal(e.Definition, &def); err != nil {
		return dag.Spec{}, problem.Internal(fmt.Errorf("stored definition of %s: %w", e.GTSID, err))
	}
	ws, issues := dag.Decode(def.Implementation.WorkflowSpec, dag.BasicChecks)
	if len(issues) > 0 {
		return dag.Spec{}, problem.Conflict("invalid_dag", "the stored spec of %s no longer validates (%s at %s): register a new version", e.GTSID, issues[0].Message, issues[0].Path)
	}
	return ws.Spec, nil
}

// qualityChecks validates one quality check of a DAG task (quality.ValidateCheck), for dag.Decode.
func qualityChecks(raw json.RawMessage, path string) []dag.Issue {
	var out []dag.Issue
	for _, is := range quality.ValidateCheck(raw, path) {
		out = append(out, dag.Issue{Path: is.Path, Code: strings.ToUpper(is.Code), Message: is.Message})
	}
	return out
}
