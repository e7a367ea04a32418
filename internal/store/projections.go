package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/larkrun/lark/internal/invocation"
)

// ProjectionReader reads the stored projections exactly as they are, and the event logs they are
// projections of, without trusting one to read the other: what `lark admin projections verify`
// (internal/projection) compares. Invocation and Events decode the record and check the log against
// its last_seq; these reads do neither, so a damaged projection can still be read and reported.
type ProjectionReader interface {
	// InvocationTenants lists the tenants that have invocations, sorted (one index probe per
	// tenant, not a scan). Invocations the retention job is purging do not count.
	InvocationTenants(ctx context.Context) ([]string, error)
	// StoredInvocations returns up to q.Limit of a tenant's stored invocation projections ordered by
	// (created_at, id), after the position q.After (a StoredInvocation.Cursor; "" = from the first),
	// along the (tenant_id, created_at, id) index. ErrBadCursor when q.After is not a cursor.
	StoredInvocations(ctx context.Context, q StoredInvocationQuery) ([]StoredInvocation, error)
	// InvocationLog returns up to q.Limit events of an invocation's log after q.AfterSeq, in order,
	// without reading its projection (q.TenantID is not checked: the log has no tenant column). A
	// hole yields *GapError; an end of the log before q.Limit is not one (no projection says where
	// it ends).
	InvocationLog(ctx context.Context, q EventLogQuery) ([]invocation.Event, error)
	// EventConsumptions lists the seqs of the published events an invocation consumed
	// (Tx.ConsumeEvent: the events that satisfied its waits), ascending.
	EventConsumptions(ctx context.Context, tenantID, invocationID string) ([]int64, error)
}

// ProjectionTx rewrites projections from the event log, one invocation or one usage hour per
// transaction (internal/projection's rebuild).
type ProjectionTx interface {
	// LockInvocation reads an invocation's stored projection and locks it until the transaction ends
	// (PostgreSQL: SELECT ... FOR UPDATE; an Append to the invocation by another process waits, since
	// it locks the row the same way). ErrNotFound when the invocation does not exist.
	LockInvocation(tenantID, id string) (StoredInvocation, error)
	// InvocationLog is the invocation's event log after the seq after (0: the whole log), read
	// inside the transaction (see ProjectionReader.InvocationLog).
	InvocationLog(id string, after int64) ([]invocation.Event, error)
	// RewriteInvocation replaces the stored projection of r.ID (its record and every column derived
	// from it: status, last_seq, updated_at, entrypoint ids, mode, correlation id, subject, owner,
	// created_at) with r. The queue state and the retention job's columns are left alone.
	// ErrNotFound when the row does not exist.
	RewriteInvocation(r invocation.Record) error
	// EventConsumptions is ProjectionReader.EventConsumptions read inside the transaction.
	EventConsumptions(tenantID, id string) ([]int64, error)
	// ReplaceEventConsumptions makes seqs the invocation's consumed events: stored ones left out
	// are deleted, missing ones inserted.
	ReplaceEventConsumptions(tenantID, id string, seqs []int64) error
	// LockUsage keeps every other writer from changing the usage aggregates until the transaction
	// ends (PostgreSQL: LOCK TABLE usage_hourly IN SHARE ROW EXCLUSIVE MODE: an Append's upsert
	// waits; SQLite: its single writer already does).
	LockUsage() error
	// UsageInvocations lists the ids of a tenant's invocations that may have appended events in
	// [from, to): created before to and last updated at or after from.
	UsageInvocations(tenantID string, from, to time.Time) ([]string, error)
	// UsageRows reads the tenant's stored aggregates of the hour starting at hour, one row per
	// entrypoint (summed over shards), by entrypoint id.
	UsageRows(tenantID string, hour time.Time) ([]UsageRow, error)
	// ReplaceUsage replaces the tenant's aggregates of the hour starting at hour (every entrypoint,
	// every shard) with rows (one per entrypoint; Start is ignored): rows left out, or all zero, are
	// deleted.
	ReplaceUsage(tenantID string, hour time.Time, rows []UsageRow) error
}

// ProjectionLocker serialises projection rebuilds between processes.
type ProjectionLocker interface {
	// LockProjections takes the store-wide rebuild lock, held until release is called, so that two
	// rebuilds never run at once. It fails at once (not waiting) when another process holds it.
	// SQLite: the database file's lock, which OpenSQLite already holds, so this is a no-op;
	// PostgreSQL: a session advisory lock (ProjectionLockKey, and the hash of the store's schema, so
	// that stores in separate schemas of one database do not share it).
	LockProjections(ctx context.Context) (release func() error, err error)
}

// ProjectionLockKey is the first key of the PostgreSQL advisory lock a projection rebuild holds
// (pg_try_advisory_lock(ProjectionLockKey, hashtext(current_schema()))): "prj!" as a big-endian
// integer.
const ProjectionLockKey int32 = 0x70726a21

// StoredInvocationQuery selects stored invocation projections (ProjectionReader.StoredInvocations).
type StoredInvocationQuery struct {
	// TenantID is the tenant whose invocations are listed (required).
	TenantID string
	// UpdatedSince keeps only invocations whose updated_at column is at or after it (zero: all).
	UpdatedSince time.Time
	// After is the Cursor of the last row of the previous page ("" for the first page).
	After string
	// Limit bounds the rows returned (<= 0: 100).
	Limit int
}

// StoredInvocation is one invocation's stored projection, undecoded: the record JSON and the
// columns that are derived from the record.
type StoredInvocation struct {
	ID, TenantID    string
	Record          json.RawMessage
	Status          invocation.Status
	EntrypointRef   string
	EntrypointID    string
	Mode            invocation.Mode
	CorrelationID   string
	SubjectID       string
	EntrypointOwner string
	LastSeq         int64
	// CreatedAt and UpdatedAt are the columns' times; the zero time when a column does not parse.
	CreatedAt, UpdatedAt time.Time
	// Cursor is the row's position in its tenant's list (StoredInvocationQuery.After): opaque, and
	// valid whatever the row's columns hold.
	Cursor string
}
