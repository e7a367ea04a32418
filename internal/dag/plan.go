package dag

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/larkrun/lark/internal/workerproto"
)

// Pinned is the exact version a task's entrypoint_id resolves to when a run is planned.
type Pinned struct {
	// EntrypointID is the version's full GTS id (never major-only).
	EntrypointID string
	// Ref is the version's opaque id (ep_...).
	Ref string
	// Version is its semantic version (MAJOR.MINOR.PATCH).
	Version string
}

// RunPlan is what one run of a DAG will do: for a partition key, every task in a stable topological
// order with the exact version it runs and its params. Two plans of the same spec, key and
// resolved versions are equal, whatever the order of the spec's tasks, depends_on lists or object
// members; [RunPlan.Fingerprint] says so in 64 hex digits.
type RunPlan struct {
	// PartitionKey is the run's partition ("" and absent for an unpartitioned DAG).
	PartitionKey string `json:"partition_key,omitempty"`
	// Tasks in Kahn's order, ties broken by task id: every task after all it depends on.
	Tasks []PlannedTask `json:"tasks"`
}

// PlannedTask is one task of a plan.
type PlannedTask struct {
	// ID is the task's id.
	ID string `json:"id"`
	// EntrypointID is the exact GTS id of the version the task runs.
	EntrypointID string `json:"entrypoint_id"`
	// EntrypointRef is that version's opaque id.
	EntrypointRef string `json:"entrypoint_ref"`
	// Version is that version's semantic version.
	Version string `json:"version"`
	// DependsOn are the tasks it waits for, sorted.
	DependsOn []string `json:"depends_on"`
	// Params are the task's params in canonical JSON with {{partition_key}} substituted; the
	// placeholders of upstream outputs are kept as written (they are rendered when the upstream
	// tasks have run: [Render]).
	Params json.RawMessage `json:"params"`
	// Checks are the task's quality checks, in canonical JSON, in their declared order.
	Checks []json.RawMessage `json:"checks"`
	// QuarantineEnabled is the task's quarantine_enabled.
	QuarantineEnabled bool `json:"quarantine_enabled"`
	// Retry is the task's retry policy (nil: its function's traits.retry).
	Retry *Retry `json:"retry,omitempty"`
	// AssetKey is the asset the task materializes ("": none).
	AssetKey string `json:"asset_key,omitempty"`
}

// Plan plans a run of a valid spec (one [Decode] found no issue in) for partitionKey, which
// must be a key of its partitioning ("" for an unpartitioned DAG; otherwise an error wrapping
// [ErrPartitionKey]). resolve pins each task's entrypoint_id; its error is returned wrapped with the
// task's id. The same spec, key and pinned versions always give an equal plan.
func Plan(s Spec, partitionKey string, resolve func(entrypointID string) (Pinned, error)) (RunPlan, error) {
	if err := checkKey(s.Partitioning, partitionKey); err != nil {
		return RunPlan{}, err
	}
	g := newGraph(s.Tasks)
	order := g.topo()
	if len(order) != len(s.Tasks) {
		return RunPlan{}, fmt.Errorf("dag: the spec is not valid (repeated task ids or a cycle)")
	}
	p := RunPlan{PartitionKey: partitionKey, Tasks: make([]PlannedTask, 0, len(order))}
	for _, id := range order {
		t := s.Tasks[g.index[id]]
		pin, err := resolve(t.EntrypointID)
		if err != nil {
			return RunPlan{}, fmt.Errorf("task %s: %w", t.ID, err)
		}
		pt, err := plannedTask(t, g.up[id], pin, partitionKey)
		if err != nil {
			return RunPlan{}, fmt.Errorf("task %s: %w", t.ID, err)
		}
		p.Tasks = append(p.Tasks, pt)
	}
	return p, nil
}

// checkKey checks the run's partition key against the partitioning (nil: unpartitioned).
func checkKey(p *Partitioning, key string) error {
	switch {
	case p == nil && key != "":
		return fmt.Errorf("%w: the DAG is not partitioned; give no partition_key", ErrPartitionKey)
	case p == nil:
		return nil
	case key == "":
		return fmt.Errorf("%w: the DAG is partitioned (%s); a partition_key is required", ErrPartitionKey, p.Type)
	}
	return p.ValidKey(key)
}

// plannedTask is t pinned to pin, with {{partition_key}} substituted and its JSON canonical.
func plannedTask(t Task, up []string, pin Pinned, key string) (PlannedTask, error) {
	params := t.Params
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	v, err := decodeValue(params)
	if err != nil {
		return PlannedTask{}, fmt.Errorf("params: %w", err)
	}
	v, err = renderValue(v, func(r ref) (any, bool, error) { return key, !r.partition, nil })
	if err != nil {
		return PlannedTask{}, err
	}
	canon, err := workerproto.Marshal(v)
	if err != nil {
		return PlannedTask{}, err
	}
	checks := make([]json.RawMessage, len(t.Checks))
	for i, c := range t.Checks {
		if checks[i], err = workerproto.Canonical(c); err != nil {
			return PlannedTask{}, fmt.Errorf("checks[%d]: %w", i, err)
		}
	}
	return PlannedTask{ID: t.ID, EntrypointID: pin.EntrypointID, EntrypointRef: pin.Ref, Version: pin.Version,
		DependsOn: append([]string{}, up...), Params: canon, Checks: checks,
		QuarantineEnabled: t.QuarantineEnabled, Retry: t.Retry, AssetKey: t.AssetKey}, nil
}

// Fingerprint is the hex SHA-256 of the plan's canonical JSON (004 §15): equal plans, equal
// fingerprints, on any store and in any process.
func (p RunPlan) Fingerprint() (string, error) {
	b, err := workerproto.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("dag: fingerprint: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Task returns the planned task with the id, if the plan has it.
func (p RunPlan) Task(id string) (PlannedTask, bool) {
	i := slices.IndexFunc(p.Tasks, func(t PlannedTask) bool { return t.ID == id })
	if i < 0 {
		return PlannedTask{}, false
	}
	return p.Tasks[i], true
}
