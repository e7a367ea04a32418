// Package store defines everything Lark persists, as interfaces that each database implementation
// (sqlstore for SQLite today, PostgreSQL later) satisfies. The conformance suite in storetest pins
// the behaviour down so implementations cannot drift.
//
// Reads go straight to the database. Writes are closures run by Update inside a group-committed
// transaction: the closure sees a Tx, may read through it for read-modify-write, and its changes are
// durable when Update returns nil.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/tenant"
)

// Sentinel errors. Implementations wrap them; test with errors.Is.
var (
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("conflict")
	ErrStale     = errors.New("stale revision")
	ErrBadCursor = errors.New("invalid cursor")
	ErrClosed    = errors.New("store closed")
	ErrLeaseLost = errors.New("lease not held")
)

// TenantError is the failure of one tenant's row in a read over every tenant (AllTenants): the
// read returns the other rows and joins one TenantError per row it could not decode.
type TenantError struct {
	TenantID string
	Err      error
}

func (e *TenantError) Error() string { return "tenant " + e.TenantID + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *TenantError) Unwrap() error { return e.Err }

// GapError reports a hole in an invocation's event sequence (003 §1.1): readers must halt, not skip.
type GapError struct {
	InvocationID string
	Missing      int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("invocation %s: event log gap at seq %d", e.InvocationID, e.Missing)
}

// QueryError is a bad $filter, $orderby or cursor; the API answers 400 with its message.
type QueryError struct{ Err error }

func (e *QueryError) Error() string { return e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }

// Default and maximum page sizes (000: limit default 25, max 200).
const (
	DefaultLimit = 25
	MaxLimit     = 200
)

// DefaultPageBytes is the default byte budget of a list page (ListQuery.MaxBytes): 4 MiB.
const DefaultPageBytes = 4 << 20

// PageBytes is the byte budget of a page: maxBytes, or DefaultPageBytes when it is not positive.
func PageBytes(maxBytes int) int {
	if maxBytes <= 0 {
		return DefaultPageBytes
	}
	return maxBytes
}

// ListQuery is a parsed list request.
// OrderBy may name several sortable fields, each with its own direction; the store appends the
// unique id as the final key, so a keyset cursor is exact across pages.
type ListQuery struct {
	Filter  odata.Expr
	OrderBy []odata.OrderItem
	Limit   int
	Cursor  string
	// MaxBytes is the page's byte budget (0: DefaultPageBytes). Rows are read one at a time and
	// the page ends before the first row whose stored bytes (the text and blob columns it reads,
	// payloads included) would take the page over the budget; the first row is always taken, so
	// an item bigger than the budget comes alone. A page cut short says HasMore, with a cursor
	// that continues after its last item, so a non-reading or slow client holds at most one
	// budget of items however large limit is.
	MaxBytes int
}

// Page is one page of a list.
type Page[T any] struct {
	Items      []T
	NextCursor string
	PrevCursor string
	HasMore    bool
}

// Reader holds the read operations, as the union of the read slices below: a service that needs
// one domain only may depend on its slice. Every one is scoped: by tenant, or by an
// entrypoint.Viewer that encodes the visibility rules, so another tenant's rows are never returned.
// Reads go straight to the database, outside any transaction.
type Reader interface {
	TenantReader
	TokenReader
	IdentityProviderReader
	EntrypointReader
	InvocationReader
	QueueReader
	IdempotencyReader
	EventReader
	AuditReader
	UsageReader
	LoadReader
	RetentionReader
	ScheduleReader
	BackfillReader
	SecretReader
	WebhookReader
	EventTypeReader
	TriggerReader
	ProjectionReader
	AssetReader
	WorkerReader
}

// TenantReader reads tenant policies.
type TenantReader interface {
	// Tenant reads one tenant's policy; ErrNotFound when it has none.
	Tenant(ctx context.Context, id string) (tenant.Policy, error)
}

// TokenReader reads API tokens (authentication and the token API).
type TokenReader interface {
	// TokenByHash finds a token by the hash of its secret.
	TokenByHash(ctx context.Context, hash string) (auth.Token, error)
	// ListTokens lists a tenant's tokens; tenantID "" lists all (operator). Filters: tenant_id,
	// subject_id, revoked (bool); order: tenant_id, subject_id, created_at.
	ListTokens(ctx context.Context, tenantID string, q ListQuery) (Page[auth.Token], error)
}

// EntrypointReader reads the entrypoint catalog (the registry and invocation resolution).
type EntrypointReader interface {
	// Entrypoint finds one entrypoint visible to v by opaque id or exact GTS id.
	Entrypoint(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error)
	// ListEntrypoints filters on entrypoint_id (eq with GTS wildcards, startswith), status, owner_type,
	// adapter, kind, tags (contains), title; orders on every one but tags.
	ListEntrypoints(ctx context.Context, v entrypoint.Viewer, q ListQuery) (Page[entrypoint.Entrypoint], error)
	// EntrypointVersions returns every version of a family visible to v, by major then minor.
	EntrypointVersions(ctx context.Context, v entrypoint.Viewer, family string) ([]entrypoint.Entrypoint, error)
	// LatestActive returns the highest minor of family/major whose status is active.
	LatestActive(ctx context.Context, v entrypoint.Viewer, family string, major int) (entrypoint.Entrypoint, error)
	// CountTenantEntrypoints counts a tenant's entrypoints that are not archived (the
	// max_definitions quota); Tx.CountTenantEntrypoints is the same count inside a transaction.
	CountTenantEntrypoints(ctx context.Context, tenantID string) (int64, error)
}

// InvocationReader reads invocations: their projections, their event logs and the counts of those
// in flight (quotas and the invocation API).
type InvocationReader interface {
	// Invocation reads one invocation's projection.
	Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error)
	// Events returns up to q.Limit events of an invocation's log after q.AfterSeq, in order; a hole
	// yields *GapError.
	Events(ctx context.Context, q EventLogQuery) ([]invocation.Event, error)
	// StatusAt is an invocation's status right after its event seq (for a timeline page that does not
	// start at the beginning): the status the last status-changing event up to seq set
	// (invocation.StatusAfter); "" when seq is 0.
	StatusAt(ctx context.Context, tenantID, invocationID string, seq int64) (invocation.Status, error)
	// ListInvocations lists the invocations of v's tenant that v may see (invocation.Record.VisibleTo).
	// Filters: entrypoint_id (eq, in, startswith, GTS wildcards), status, mode, correlation_id,
	// created_at; order: any of them.
	ListInvocations(ctx context.Context, v invocation.Viewer, q ListQuery) (Page[invocation.Record], error)
	// CountTenantInFlight counts a tenant's invocations that are queued, running, suspended or compensating.
	CountTenantInFlight(ctx context.Context, tenantID string) (int64, error)
	// CountTenantRunning counts a tenant's running invocations (its concurrent executions).
	CountTenantRunning(ctx context.Context, tenantID string) (int64, error)
}

// QueueReader reads the run queue's timing (the scheduler's sleep between claims).
type QueueReader interface {
	// NextDue is the earliest time after after at which queued work becomes runnable or a lease
	// expires; nil when nothing is scheduled later.
	NextDue(ctx context.Context, after time.Time) (*time.Time, error)
	// HasDue reports whether queued work is runnable, or a lease has expired, at now: whether a
	// claim at now could find anything. It reads committed state, outside the writer.
	HasDue(ctx context.Context, now time.Time) (bool, error)
	// LeaseOwners reads the lease owner of each of the invocations ids ("" for one that holds no
	// lease); an id that names no invocation is absent from the answer.
	LeaseOwners(ctx context.Context, ids []string) (map[string]string, error)
}

// IdempotencyReader reads the response cache, which maps a request to the invocation that
// answered it.
type IdempotencyReader interface {
	// CachedInvocation returns the invocation stored under a response-cache key, if not expired.
	CachedInvocation(ctx context.Context, key string, now time.Time) (tenantID, invocationID string, err error)
}

// EventReader reads published events (the events API).
type EventReader interface {
	// Event reads one published event of a tenant.
	Event(ctx context.Context, tenantID, id string) (events.Event, error)
	// ListEvents lists a tenant's published events. Filters: event_type_id, source, subject,
	// received_at; order: any of them.
	ListEvents(ctx context.Context, tenantID string, q ListQuery) (Page[events.Event], error)
}

// AuditReader reads the audit log.
type AuditReader interface {
	// ListAudit lists a tenant's audit events ("" = all); filters: type, resource_type, resource_id,
	// actor_id, correlation_id, timestamp; order: any of them.
	ListAudit(ctx context.Context, tenantID string, q ListQuery) (Page[audit.Event], error)
}

// UsageReader reads the usage aggregates (the usage API).
type UsageReader interface {
	// UsageHistory sums a tenant's usage aggregates into the buckets of q: one row per bucket and
	// entrypoint that has any, ordered by bucket start, then entrypoint id. The aggregates are a
	// projection of the event log: Tx.StartInvocation and Tx.Append add invocation.UsageOf of every
	// event they append, in the same transaction, to the tenant's aggregate for the event's hour
	// (invocation.UsageHour) and the invocation's exact entrypoint id.
	UsageHistory(ctx context.Context, tenantID string, q UsageQuery) ([]UsageRow, error)
}

// LoadReader reads every tenant's current load (the gauges /metrics computes at scrape time).
type LoadReader interface {
	// TenantLoads returns the load of every tenant that has a policy, ordered by tenant id, read in
	// one snapshot: its queue at now, its in-flight invocations, its definitions and its quotas
	// (for the gauges /metrics computes at scrape time). It must cost in proportion to the tenants
	// and the work in flight, not to the history kept.
	TenantLoads(ctx context.Context, now time.Time) ([]TenantLoad, error)
}

// UsageQuery selects usage buckets: Width-wide buckets from From until To. From, To and Width are
// whole hours (UTC), and To - From is a multiple of Width.
type UsageQuery struct {
	From, To time.Time
	Width    time.Duration
}

// UsageRow is one entrypoint's usage in one bucket.
type UsageRow struct {
	Start        time.Time
	EntrypointID string
	Usage        invocation.Usage
}

// TenantLoad is one tenant's share of the work at a moment.
type TenantLoad struct {
	TenantID string
	// Ready counts queue entries due at now (claimable once a slot is free); Delayed those due
	// later (retry backoff, durable timers); LeaseExpired the running attempts whose lease ran out
	// (their runner died; the next claim reclaims them).
	Ready, Delayed, LeaseExpired int64
	// InFlight counts the tenant's invocations in each in-flight status (queued, running,
	// suspended, compensating); a status with none is absent.
	InFlight map[invocation.Status]int64
	// Definitions counts the tenant's entrypoints that are not archived (the max_definitions quota).
	Definitions int64
	// Quotas are the tenant's policy quotas.
	Quotas tenant.Quotas
}

// Tx holds the operations allowed inside Update, as the union of the write slices below: a closure
// that needs one domain only may take its slice. They use the transaction's own context, not the
// caller's (which Context returns): a closure must be short, must not block on other work and must
// not call Update.
type Tx interface {
	// Context returns the context that Update or Enqueue was called with for this closure (in a
	// group-committed batch, each closure sees its own caller's context): the place for
	// request-scoped values such as a trace or a security context. The store's own statements do
	// not run under it, since the committer owns the transaction's lifetime; a closure may check it
	// to give up early.
	Context() context.Context
	// AfterCommit registers f to run once the transaction has committed, on the goroutine that
	// called Update (or the Enqueue's wait), before that returns; it never runs for a write that
	// was rolled back or whose commit failed. Post-commit work (wake-ups, observers) hangs here, so
	// no caller has to remember it.
	AfterCommit(f func())
	TenantTx
	TokenTx
	IdentityProviderTx
	EntrypointTx
	AuditTx
	InvocationTx
	QueueTx
	IdempotencyTx
	EventTx
	RetentionTx
	ScheduleTx
	BackfillTx
	SecretTx
	WebhookTx
	EventTypeTx
	TriggerTx
	LeaderTx
	ProjectionTx
	AssetTx
	WorkerTx
}

// TenantTx reads and writes tenant policies inside a transaction.
type TenantTx interface {
	// Tenant reads a tenant's policy inside the transaction; ErrNotFound when it has none.
	Tenant(id string) (tenant.Policy, error)
	// PutTenant creates or replaces a tenant's policy.
	PutTenant(p tenant.Policy) error
}

// TokenTx issues, reads and revokes API tokens.
type TokenTx interface {
	// InsertToken stores a new token.
	InsertToken(t auth.Token) error
	// Token returns a token by id within tenantID ("" = any tenant).
	Token(tenantID, id string) (auth.Token, error)
	// RevokeToken sets revoked_at; ErrNotFound unless the token exists in tenantID ("" = any).
	RevokeToken(tenantID, id string, at time.Time) error
}

// EntrypointTx writes the entrypoint catalog, with the reads its quota and lifecycle checks need.
type EntrypointTx interface {
	// InsertEntrypoint stores a new entrypoint; ErrConflict when the same GTS id (or the same
	// family/major/minor) exists in the tenant or at platform scope, or, for a platform
	// entrypoint, anywhere.
	InsertEntrypoint(e entrypoint.Entrypoint) error
	// EntrypointByRef reads an entrypoint by opaque id, unscoped: callers check visibility.
	EntrypointByRef(id string) (entrypoint.Entrypoint, error)
	// UpdateEntrypoint replaces the row whose Revision equals e.Revision and bumps it; ErrStale otherwise.
	UpdateEntrypoint(e *entrypoint.Entrypoint) error
	// DeleteEntrypoint deletes an entrypoint by opaque id.
	DeleteEntrypoint(id string) error
	// CountTenantEntrypoints is Reader.CountTenantEntrypoints inside the transaction.
	CountTenantEntrypoints(tenantID string) (int64, error)
	// CountInFlight counts the tenant's invocations of an entrypoint version that are not finished.
	CountInFlight(tenantID, entrypointRef string) (int64, error)
}

// AuditTx appends to the audit log, in the transaction of the change it records.
type AuditTx interface {
	// InsertAudit stores an audit event.
	InsertAudit(e audit.Event) error
}

// InvocationTx creates invocations and appends to their event logs, keeping each projection (and
// the usage aggregates) in step in the same transaction.
type InvocationTx interface {
	// Invocation reads an invocation's projection inside the transaction.
	Invocation(tenantID, invocationID string) (invocation.Record, error)
	// InvocationHead reads an invocation's status, last seq and the idempotency key of its last
	// event, and locks its row until the transaction ends (PostgreSQL: FOR UPDATE, as Append
	// does): a cheap check that a state read earlier is still current. ErrNotFound when the
	// invocation does not exist.
	InvocationHead(tenantID, invocationID string) (Head, error)
	// Invocations reads the projections of the runnable items rs (their TenantID and InvocationID)
	// in one statement, in rs's order; an item whose invocation does not exist has none (the
	// result is then shorter, and each record names its invocation).
	Invocations(rs []Runnable) ([]invocation.Record, error)
	// StartInvocation creates an invocation: events[0] is its first event (type created, Data = the
	// initial record), the events after it follow in the log, and s is its queue state (the zero
	// Scheduling for one that is not queued). It writes one row insert plus the events (the hot path
	// of every invocation start).
	StartInvocation(events []invocation.Event, s Scheduling) (invocation.Record, error)
	// Append appends events to an invocation's log, assigning consecutive seqs, and updates the
	// projection in the same transaction, with one read and one write of it. An event whose
	// idempotency key is already in the log is skipped (not an error); the returned slice holds the
	// events actually appended. An event's At earlier than that of the event before it is raised to
	// it, so At never decreases with Seq. With the zero AppendOptions the append is unconditional;
	// RequireLease makes it conditional on a lease (ErrLeaseLost otherwise), Schedule replaces the
	// queue state in the same write, and Expect saves the read.
	Append(req AppendRequest) (invocation.Record, []invocation.Event, error)
}

// QueueTx reads and moves the run queue: queue states, leases and the due work a claim picks from.
type QueueTx interface {
	// Scheduling returns an invocation's queue state.
	Scheduling(tenantID, invocationID string) (Scheduling, error)
	// SetScheduling replaces an invocation's queue state.
	SetScheduling(tenantID, invocationID string, s Scheduling) error
	// ExpiredLeases lists up to limit invocations whose lease ran out at now (their runner died),
	// oldest expiry first.
	ExpiredLeases(now time.Time, limit int) ([]Runnable, error)
	// DueTenants lists up to limit tenants that have queued work due at now (available_at <= now),
	// in tenant id order, starting after the tenant id after ("" = from the first).
	DueTenants(after string, now time.Time, limit int) ([]string, error)
	// DueEntrypoints lists the entrypoint versions (opaque refs) of a tenant that have queued work due
	// at now.
	DueEntrypoints(tenantID string, now time.Time) ([]string, error)
	// DueWork lists up to q.Limit of a tenant's queued invocations of one entrypoint version that
	// are due at q.Now, oldest available_at first.
	DueWork(q DueWorkQuery) ([]Runnable, error)
	// RunningByEntrypoint counts a tenant's running invocations per entrypoint version.
	RunningByEntrypoint(tenantID string) (map[string]int64, error)
	// CountTenantRunning is Reader.CountTenantRunning inside the transaction.
	CountTenantRunning(tenantID string) (int64, error)
	// ExpireLeases ends every lease that has not expired at now (sets its expiry to now), so that the
	// work it held is reclaimed by the next claim; it returns how many it ended. Only a process that
	// knows every lease holder is gone calls it (see Exclusive).
	ExpireLeases(now time.Time) (int64, error)
}

// IdempotencyTx reads and writes the idempotency keys and the response cache that make a repeated
// request return the invocation it started the first time.
type IdempotencyTx interface {
	// IdempotencyKey returns the live (unexpired at q.Now) record of a key; ErrNotFound otherwise.
	IdempotencyKey(q IdempotencyKeyQuery) (IdempotencyRecord, error)
	// PutIdempotencyKey stores a key, replacing one expired at r.CreatedAt; a live key (another
	// request's, perhaps committed by another node since this transaction read it) is left as it
	// is and the answer is ErrConflict.
	PutIdempotencyKey(r IdempotencyRecord) error
	// PutCachedInvocation stores a response-cache entry (replacing any previous one under its key).
	PutCachedInvocation(e CacheEntry) error
	// PurgeExpired deletes idempotency keys, cache entries and worker nonces that expired before now.
	PurgeExpired(now time.Time) (int64, error)
	// UseNonce records a worker envelope's nonce until expires and reports whether it was new (false:
	// a replay, nothing changed).
	UseNonce(nonce string, expires time.Time) (bool, error)
}

// EventTx publishes events and keeps the workflows' waits for them: which waits exist and which
// events each invocation has consumed.
type EventTx interface {
	// InsertEvent stores a published event with the next arrival Seq. If the tenant already has an
	// event with e.ID, it returns that one and false, and stores nothing.
	InsertEvent(e events.Event) (events.Event, bool, error)
	// EventsSince lists the published events q selects, in arrival order.
	EventsSince(q EventsSinceQuery) ([]events.Event, error)
	// ConsumeEvent records that the published event eventSeq satisfied a wait of invocationID. It
	// reports false (and changes nothing) when that invocation had consumed the event already.
	ConsumeEvent(tenantID, invocationID string, eventSeq int64) (bool, error)
	// PutEventWait registers a workflow's wait for an event, replacing one at the same
	// (InvocationID, Seq).
	PutEventWait(w events.Wait) error
	// EventWaits lists a tenant's waits for events of typeID, oldest first.
	EventWaits(tenantID, typeID string) ([]events.Wait, error)
	// DeleteEventWaits removes every wait of an invocation.
	DeleteEventWaits(tenantID, invocationID string) error
}

// Scheduling is an invocation's place in the queue: AvailableAt is set while it waits to run,
// the lease while a runner holds it.
type Scheduling struct {
	AvailableAt    *time.Time
	LeaseOwner     string
	LeaseExpiresAt *time.Time
}

// EventLogQuery selects a page of an invocation's event log (Reader.Events).
type EventLogQuery struct {
	TenantID     string
	InvocationID string
	// AfterSeq: only events whose Seq is greater are returned (0 = from the first).
	AfterSeq int64
	// Limit bounds the events returned.
	Limit int
	// MaxBytes, when positive, bounds the events' data bytes as ListQuery.MaxBytes does a page:
	// reading stops before the first event that would take them over it (the first is always
	// returned). 0 reads up to Limit whatever their size.
	MaxBytes int
}

// AppendRequest is one Tx.Append: events for an invocation's log, with the options that qualify
// the write (the zero AppendOptions for a plain append).
type AppendRequest struct {
	TenantID     string
	InvocationID string
	Events       []invocation.Event
	AppendOptions
}

// DueWorkQuery selects the due queue entries of one entrypoint version of a tenant (Tx.DueWork).
type DueWorkQuery struct {
	TenantID      string
	EntrypointRef string
	// Now is the time at which entries must be due.
	Now time.Time
	// Limit bounds the entries returned.
	Limit int
}

// IdempotencyKeyQuery names one idempotency key, live at Now (Tx.IdempotencyKey).
type IdempotencyKeyQuery struct {
	TenantID string
	Scope    string
	Key      string
	Now      time.Time
}

// CacheEntry is one response-cache entry: the invocation that answers the request stored under
// Key, until ExpiresAt (Tx.PutCachedInvocation).
type CacheEntry struct {
	Key          string
	TenantID     string
	InvocationID string
	ExpiresAt    time.Time
}

// EventsSinceQuery selects published events for a workflow's event wait (Tx.EventsSince).
type EventsSinceQuery struct {
	TenantID string
	// TypeID is the event type waited for.
	TypeID string
	// Since: only events received at or after it.
	Since time.Time
	// AfterSeq: only events whose arrival Seq is greater.
	AfterSeq int64
	// UnconsumedBy, when set, leaves out the events Tx.ConsumeEvent recorded for that invocation.
	UnconsumedBy string
	// Limit bounds the events returned.
	Limit int
}

// AppendOptions qualify Tx.Append.
type AppendOptions struct {
	// RequireLease, when set, makes the append conditional on this lease owner holding the invocation.
	RequireLease string
	// Schedule, when set, replaces the queue state in the same write.
	Schedule *Scheduling
	// Expect, when set, is the projection the caller believes is current. If the stored last_seq
	// matches it, it is used instead of reading and decoding the stored projection (a hot-path
	// saving); otherwise the stored projection is read as usual.
	Expect *invocation.Record
	// ExpectOnly makes Expect a condition: when the stored last_seq differs, Append fails with
	// ErrConflict instead of reading the stored projection (a write that depends on an earlier one
	// that did not apply).
	ExpectOnly bool
}

// Head is the tip of an invocation's log (InvocationTx.InvocationHead).
type Head struct {
	Status  invocation.Status
	LastSeq int64
	// LastKey is the idempotency key of the event at LastSeq ("" when there is none).
	LastKey string
}

// Runnable is a claimable queue entry.
type Runnable struct {
	TenantID      string
	InvocationID  string
	EntrypointRef string
	// Due is when it became runnable (available_at, or the lease expiry of an expired lease).
	Due time.Time
	// Expired is set when the invocation was leased and the lease ran out: its runner died.
	Expired bool
}

// IdempotencyRecord remembers which invocation an Idempotency-Key started, and with what request.
type IdempotencyRecord struct {
	TenantID     string
	Scope        string
	Key          string
	RequestHash  string
	InvocationID string
	CreatedAt    time.Time
	ExpiresAt    time.Time
}

// Store is a complete persistence implementation.
type Store interface {
	Reader
	// Update runs fn in a group-committed transaction. fn's writes are rolled back if it returns an
	// error (other closures in the same batch are unaffected). Update returns after the batch commits.
	Update(ctx context.Context, fn func(Tx) error) error
	// Enqueue queues fn like Update, behind every write queued before it, and returns at once: wait
	// (to be called once) returns what Update would have. Writes one goroutine enqueues in turn are
	// applied in that order; a write that depends on an earlier one that failed must detect it
	// (AppendOptions.RequireLease and Expect do).
	Enqueue(ctx context.Context, fn func(Tx) error) (wait func() error)
	// CatalogGeneration is a counter that moves after every Update that wrote an entrypoint or a
	// tenant (Tx.InsertEntrypoint, UpdateEntrypoint, DeleteEntrypoint, PutTenant) and committed: it
	// is incremented before that Update returns, so a cache filled under an older generation is stale
	// for every request that follows the write. Writes that roll back may move it too (a harmless
	// cache miss); writes to other tables never do. It covers this process's writes only: caches
	// also bound their entries' age for other processes sharing the database.
	CatalogGeneration() uint64
	// Ping checks the database is reachable and migrated.
	Ping(ctx context.Context) error
	// Exclusive reports whether this process is the database's only user (the embedded store, locked
	// while open), so that leases found at start-up belong to processes that are gone.
	Exclusive() bool
	ProjectionLocker
	Close() error
}

// RetentionReader holds the reads of the retention job (internal/retention) and the history size
// the usage API reports.
type RetentionReader interface {
	// AllTenants returns every tenant's policy, enabled or not, by tenant id. A stored policy that
	// does not decode is left out and named in the error, which then joins one *TenantError per such row;
	// the policies that decode are still returned with it, so one bad row costs only its tenant.
	AllTenants(ctx context.Context) ([]tenant.Policy, error)
	// TenantHistoryBytes is the tenant's execution history size: the sum of HistorySize.Bytes over
	// its finished invocations as the retention job last measured them (0 before the first
	// measurement). It lags by up to one job interval and leaves out invocations still in flight.
	TenantHistoryBytes(ctx context.Context, tenantID string) (int64, error)
	// MeasureHistory measures up to limit of the tenant's finished invocations that were not measured
	// since they last finished. It only reads; Tx.RecordHistory stores the measurements.
	MeasureHistory(ctx context.Context, tenantID string, limit int) ([]HistorySize, error)
}

// RetentionTx holds the writes of the retention job. Each is one bounded batch, independent of the
// others: a process that stops between two batches leaves consistent data, and the next pass
// continues where it stopped. They are the only deletes of invocation history, published events
// and audit events.
type RetentionTx interface {
	// RecordHistory stores the measurements that are still current (the invocation's last_seq is
	// unchanged) and moves the tenant's total by the difference; it returns how many it stored.
	RecordHistory(tenantID string, sizes []HistorySize) (int, error)
	// ReopenHistory marks up to limit of the tenant's measured invocations that are in flight again
	// (a retry, a redrive, a compensation) for measuring again once they finish; until then their
	// last measurement stays in the total. It returns how many it marked.
	ReopenHistory(tenantID string, limit int) (int64, error)
	// PurgeHistory deletes one batch of the tenant's finished history, oldest finished first: an
	// invocation goes with its event log, event waits, idempotency keys and response-cache entries.
	// In-flight invocations, and finished children or compensation handlers whose parent workflow is
	// still in flight, are never touched.
	PurgeHistory(tenantID string, p HistoryPurge) (HistoryPurged, error)
	// PurgeEvents deletes up to limit of the tenant's published events received before before,
	// oldest first, keeping any a registered event wait may still read (received since its since).
	PurgeEvents(tenantID string, before time.Time, limit int) (int64, error)
	// PurgeScheduleRuns deletes up to limit rows of the tenant's schedule history recorded before
	// before: schedule runs other than pending ones, then backfills that finished before it with
	// their partitions (a backfill counts its partitions and itself).
	PurgeScheduleRuns(tenantID string, before time.Time, limit int) (int64, error)
	// PurgeAudit deletes up to limit of the tenant's audit events recorded before before, oldest
	// first. It is the audit log's only delete.
	PurgeAudit(tenantID string, before time.Time, limit int) (int64, error)
}

// HistorySize is one measurement of a finished invocation's history: the bytes of its record plus,
// for each event row, its type, data, idempotency key and timestamp, documents counted as written
// (a store that packs them counts them unpacked): the payload, not the pages and indexes around it.
type HistorySize struct {
	InvocationID string
	// LastSeq is the log position measured; RecordHistory stores the measurement only if the
	// invocation is still at it.
	LastSeq    int64
	Bytes      int64
	FinishedAt time.Time
}

// HistoryPurge says what one PurgeHistory batch may delete.
type HistoryPurge struct {
	// FinishedBefore: invocations that finished before it are purged (retention.execution_history_days).
	FinishedBefore time.Time
	// CapBytes, when positive, is the size cap (quotas.max_execution_history_mb): while the tenant's
	// total is above it, the oldest finished invocations are purged whatever their age.
	CapBytes int64
	// MaxRows bounds the rows one batch deletes (invocation rows plus event rows). An invocation
	// with more events than that is hidden at once and deleted over several batches.
	MaxRows int
}

// HistoryPurged reports one PurgeHistory batch.
type HistoryPurged struct {
	// Invocations is how many invocations left the tenant's history (gone or hidden for deletion).
	Invocations int64
	// Rows is how many rows were deleted (invocation rows and event rows).
	Rows int64
	// Bytes is how much the tenant's history total went down.
	Bytes int64
	// More is set when the batch stopped at its bound: call again.
	More bool
}
