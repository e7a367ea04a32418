package store

import (
	"context"

	"github.com/larkrun/lark/internal/groupcommit"
)

// WithWriteWeight returns ctx whose writes are weighed as bytes and queued with tenantID's other
// writes: the writer takes waiting writes tenant by tenant, round robin, and bounds each
// transaction by the bytes its writes weigh, so one tenant's large payloads cannot hold another
// tenant's small write behind them (groupcommit.WithWeight). The API sets it on every request, with
// the size of the request's body; the engine's own writes carry none and share one lane.
func WithWriteWeight(ctx context.Context, tenantID string, bytes int64) context.Context {
	return groupcommit.WithWeight(ctx, tenantID, bytes)
}
