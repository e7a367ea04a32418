// Package attempt is the data a claim hands to a runner: one claimed attempt of an invocation, its
// lease and the entrypoint version it is pinned to.
//
// It is a package of its own, below both the runner that runs attempts (execution) and the package
// that claims and moves them (dispatch), so that neither imports the other: dispatch knows only
// Attempt values, never the runner that takes them, and a remote worker can later receive the same
// value over the wire without linking the dispatcher. It holds plain data only — no closures, no
// handles on a store — so an Attempt can be copied, logged or encoded.
package attempt

import (
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
)

// Kind says what a claimed attempt is for.
type Kind string

const (
	// KindRun runs the invocation's program: a first attempt, a retry, a resumed workflow, or
	// work reclaimed from a runner whose lease expired.
	KindRun Kind = "run"
	// KindCompensate runs the step compensations of a canceled workflow (its journal replayed,
	// no step run again); the invocation's status stays canceled or compensating.
	KindCompensate Kind = "compensate"
)

// Lease is the claim's hold on the invocation: until ExpiresAt, only Owner may record the
// attempt's outcome; after it, another process may reclaim the work.
type Lease struct {
	Owner     string
	ExpiresAt time.Time
}

// Attempt is one claimed attempt, everything a runner needs to run it without reading the store
// again: the invocation as the claim left it (for KindRun, after its started, resumed or
// reclaimed event), the lease the claim took, and the pinned entrypoint version (immutable once
// active, so a runner may use its own cache of the parsed definition keyed by Entrypoint.ID).
type Attempt struct {
	Kind       Kind
	Invocation invocation.Record
	Lease      Lease
	Entrypoint entrypoint.Entrypoint
	// Due is when the work became runnable (created, due for a retry or a timer, or its previous
	// runner's lease expired): its queue wait runs from there to the start of its execution.
	Due time.Time
}

// LeaseOwner is the lease owner of the engine attempt rec is at, run by the process node:
// "node/attempt/engine_attempt". The claim takes its lease under this name and the completion
// records an outcome only while the lease is still held under it, so both use this function.
func LeaseOwner(node string, rec invocation.Record) string {
	return fmt.Sprintf("%s/%d/%d", node, rec.Attempt, rec.EngineAttempt)
}

// CompensationLease is the lease owner of the compensation run of a canceled workflow whose run
// held (or would hold) owner: distinct from the canceled run's, so that run's late outcome can
// never be applied.
func CompensationLease(owner string) string { return owner + "/compensate" }
