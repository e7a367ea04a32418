package store

import (
	"context"
	"time"
)

// Worker is a remote worker as one node saw it (docs/workers.md, "Seeing the workers"): the node
// records it while the worker polls or heartbeats there, at most every few seconds.
type Worker struct {
	// WorkerID is the id the worker polls with; Node the node that saw it. A worker that polls
	// several nodes has a row on each.
	WorkerID string
	Node     string
	// KeyID is the worker key its requests were signed with; Tenants the tenants that key is bound
	// to (empty: an unbound key, which takes every tenant's tasks).
	KeyID   string
	Tenants []string
	// Capacity is the concurrency its last poll said (0: not said); Version what the worker
	// says it runs ("" when it says nothing).
	Capacity int
	Version  string
	// TasksHeld is how many of this node's tasks it held at LastSeenAt.
	TasksHeld int
	// FirstSeenAt and LastSeenAt: the worker's first and last request to the node, as recorded.
	FirstSeenAt time.Time
	LastSeenAt  time.Time
}

// WorkerReader reads the workers the nodes have seen.
type WorkerReader interface {
	// ListWorkers lists the workers seen: every one for q.TenantID "" (the platform operator),
	// else those whose key is unbound or bound to q.TenantID. Filters: worker_id, node, key_id,
	// first_seen_at, last_seen_at and status ('online': last seen at or after q.OnlineSince,
	// 'offline': before); order: all but status (default worker_id, then node).
	ListWorkers(ctx context.Context, q WorkerQuery) (Page[Worker], error)
}

// WorkerQuery selects a page of workers (Reader.ListWorkers).
type WorkerQuery struct {
	ListQuery
	// TenantID scopes the list to the workers that may take the tenant's tasks ("": every worker).
	TenantID string
	// OnlineSince is the earliest last_seen_at of an online worker (the status filter's).
	OnlineSince time.Time
}

// WorkerTx records the workers the nodes see.
type WorkerTx interface {
	// RecordWorkers upserts each worker's row by (WorkerID, Node): a new one is stored as given, an
	// existing one keeps its FirstSeenAt and takes every other field.
	RecordWorkers(ws []Worker) error
	// PurgeWorkers deletes up to limit workers last seen before before, oldest first (the retention
	// job's); it returns how many.
	PurgeWorkers(before time.Time, limit int) (int64, error)
}
