package larkclient

import (
	"context"
	"iter"
	"time"
)

// Worker is a remote worker as one node saw it (docs/workers.md, "Seeing the workers"): one per
// worker id and node.
type Worker struct {
	Raw
	WorkerID    string    `json:"worker_id"`     // the id it polls with
	Node        string    `json:"node"`          // the node that saw it
	KeyID       string    `json:"key_id"`        // the worker key it signs with
	Tenants     []string  `json:"tenants"`       // the tenants that key is bound to (empty: every tenant)
	Status      string    `json:"status"`        // online (seen in the last 30 s) or offline
	Capacity    int       `json:"capacity"`      // the concurrency its polls say (0: not said)
	Version     string    `json:"version"`       // what it says it runs ("" if nothing)
	TasksHeld   int       `json:"tasks_held"`    // the tasks it holds on that node
	FirstSeenAt time.Time `json:"first_seen_at"` // its first request to the node
	LastSeenAt  time.Time `json:"last_seen_at"`  // its last request, as recorded (up to ~10 s behind)
}

// ListWorkers returns one page of the remote workers the nodes have seen (operator role: those a
// tenant's tasks may go to; the platform operator: all). Filters: worker_id, node, key_id,
// status, first_seen_at, last_seen_at.
func (c *Client) ListWorkers(ctx context.Context, opts ListOptions) (*Page[Worker], error) {
	return listPage[Worker](ctx, c, "/workers", opts.values())
}

// AllWorkers iterates every worker matching opts.
func (c *Client) AllWorkers(ctx context.Context, opts ListOptions) iter.Seq2[Worker, error] {
	return all(ctx, opts, c.ListWorkers)
}
