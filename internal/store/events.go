package store

import (
	"context"
	"time"

	"github.com/larkrun/lark/internal/invocation"
)

// EventLog reads an invocation's log (Store.Events).
type EventLog interface {
	Events(ctx context.Context, q EventLogQuery) ([]invocation.Event, error)
}

// EventsAfter reads invocation id's events with a seq above after, in order, in pages of 1,000.
func EventsAfter(ctx context.Context, log EventLog, tenantID, id string, after int64) ([]invocation.Event, error) {
	var all []invocation.Event
	for {
		evs, err := log.Events(ctx, EventLogQuery{TenantID: tenantID, InvocationID: id, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
		if len(evs) < 1000 {
			return all, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// AppendWaking appends req's events (req.Schedule must be nil) and then, when the invocation is
// suspended once they are folded in (its status read by the append, under its row's lock), makes
// it runnable at now: a resolution of what a suspended workflow or DAG run waits for. A status
// read before the append may be stale on a store with concurrent writers (the invocation claimed
// since); scheduling a running invocation would take its lease away.
func AppendWaking(tx Tx, req AppendRequest, now time.Time) (invocation.Record, []invocation.Event, error) {
	out, appended, err := tx.Append(req)
	if err != nil || out.Status != invocation.StatusSuspended {
		return out, appended, err
	}
	return out, appended, tx.SetScheduling(out.TenantID, out.ID, Scheduling{AvailableAt: &now})
}
