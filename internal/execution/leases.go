package execution

import (
	"context"
	"maps"
	"slices"
	"time"
)

// DefaultLeaseWatch is how often WatchLeases checks the leases of the executions running here.
const DefaultLeaseWatch = 500 * time.Millisecond

// WatchLeases stops, until ctx ends, the executions running here whose lease is no longer theirs:
// canceled or suspended through another node (whose notification did not arrive, or has not yet),
// or taken back by another node after their lease ran out. Every interval it reads the lease owner
// of each invocation running here (one query); an execution found without its lease at two reads
// in a row is stopped, as a cancel taken on this node stops it (a workflow that has just recorded
// its suspension, and released its lease, is no longer tracked by the next read). So a control
// action taken on any node reaches the attempt within two intervals. docs/operations.md,
// "Several nodes".
func (x *Executor) WatchLeases(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultLeaseWatch
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var suspect map[string]string // lost at the previous read: id → the owner it ran under
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		suspect = x.checkLeases(ctx, suspect)
	}
}

// checkLeases reads the leases of the executions running here, stops those lost now and at the
// previous read (suspect), and returns the ones lost now.
func (x *Executor) checkLeases(ctx context.Context, suspect map[string]string) map[string]string {
	held := x.running.Leases()
	if len(held) == 0 {
		return nil
	}
	current, err := x.store.LeaseOwners(ctx, slices.Collect(maps.Keys(held)))
	if err != nil {
		if ctx.Err() == nil {
			x.logger.WarnContext(ctx, "lease check failed; executions canceled elsewhere run on until the next check", "err", err)
		}
		return suspect
	}
	lost := map[string]string{}
	for id, owner := range held {
		if cur, ok := current[id]; !ok || cur != owner {
			lost[id] = owner
		}
	}
	again := map[string]string{}
	for id, owner := range lost {
		if suspect[id] == owner {
			again[id] = owner
		}
	}
	for _, id := range x.running.Stop(again) {
		x.logger.InfoContext(ctx, "execution stopped: its lease is no longer held here (canceled, suspended or taken over elsewhere)",
			"invocation_id", id, "lease_owner", again[id])
	}
	return lost
}
