package store

import (
	"context"

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
