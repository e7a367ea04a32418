// Package scheduler manages schedules (000's Schedule API with 002's policies) and fires them: a
// loop reads the schedules that are due through the store's due-time index, and for each instant
// records a run and queues its invocation in one transaction, so that every instant fires exactly
// once, across restarts too. Missed instants (server down, schedule paused) follow the schedule's
// missed_policy; an instant due while the previous run is in flight follows its concurrency_policy.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/cron"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/loops"
	"github.com/larkrun/lark/internal/mergepatch"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
)

// Invoker is what the scheduler needs of invoke.Service.
type Invoker interface {
	Plan(ctx context.Context, st invoke.SystemStart) (invoke.Planned, error)
	NewID() string
	// Enqueue and EnqueueAt write a planned invocation inside tx; once tx commits, the invoker
	// reports it and wakes its dispatcher (tx's AfterCommit hook).
	Enqueue(tx store.Tx, p invoke.Planned, id string, now time.Time) (invocation.Record, error)
	EnqueueAt(tx store.Tx, p invoke.Planned, id string, now, at time.Time) (invocation.Record, error)
	Control(ctx context.Context, sc auth.SecurityContext, id string, action invoke.Action) (invocation.Record, bool, error)
	// CanSee reports whether sc may see an entrypoint (entrypoint.Entrypoint.VisibleTo).
	CanSee(ctx context.Context, sc auth.SecurityContext, entrypointID string) (bool, error)
}

// Options configure a Service.
type Options struct {
	Clock  clock.Clock
	IDs    idgen.Generator
	Logger *slog.Logger
	// Grace is how late an instant may be fired and still count as on time (default 1 min); older
	// instants are missed and follow the missed policy.
	Grace time.Duration
	// Batch bounds the schedules one firing transaction handles (default 512).
	Batch int
	// Poll is the longest sleep of the firing loop (default 1 s): a safety net for writes the loop
	// was not woken for. Pending catch-up runs are looked at this often, too.
	Poll time.Duration
	// Lookahead is how far ahead of its instant a run of a schedule whose concurrency_policy is
	// allow is recorded and its invocation queued, runnable from the instant on (default 5 s;
	// negative: at the instant). Firing ahead keeps thousands of schedules due at the same second
	// on time: the writes are done before the second comes. Runs of forbid and replace schedules
	// are decided at their instant (the previous run's state then matters).
	Lookahead time.Duration
	// Announce, when set, tells the other nodes sharing the store to wake their loop too
	// (internal/wakeup): Wake calls it. It must not block.
	Announce func()
	// Failed is called with "scheduler" for every due schedule that could not be fired and with
	// "backfill" for every backfill that could not be driven (nil: not counted); the server counts
	// them in lark_maintenance_failures_total. Each failure is also logged with its tenant id, and
	// the loop goes on with the next schedule or backfill.
	Failed func(job string)
	// FireLag, when set, hears the fire lag of each run the loop starts, once its firing
	// transaction committed: the time from its scheduled instant to its recording (0 for a run
	// queued ahead of its instant). The server observes it in lark_scheduler_fire_lag_seconds.
	FireLag func(lag time.Duration)
	// Tracer records a schedule.fire span for each run the loop starts and a backfill.partition
	// span for each partition the backfill driver starts (docs/observability.md): the invocation is
	// created in its trace (default: no spans).
	Tracer trace.Tracer
}

// Job names of Options.Failed.
const (
	JobScheduler = "scheduler"
	JobBackfill  = "backfill"
)

// Store is the store methods the scheduler uses (store.Store has them all): the schedule and
// backfill reads, the tenant's policy, the invocation a run started, and Update for its writes.
type Store interface {
	store.TenantReader
	store.BackfillReader
	Schedule(ctx context.Context, tenantID, id string) (schedule.Schedule, error)
	ListSchedules(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[schedule.Schedule], error)
	ScheduleRuns(ctx context.Context, tenantID, scheduleID string, q store.ListQuery) (store.Page[schedule.Run], error)
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]schedule.Schedule, error)
	NextScheduleDue(ctx context.Context) (*time.Time, error)
	Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error)
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Service implements the schedule use cases and the firing loop.
type Service struct {
	store Store
	inv   Invoker
	o     Options
	wake  loops.Bell
}

// New returns a Service.
func New(st Store, inv Invoker, o Options) *Service {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.IDs == nil {
		o.IDs = idgen.UUIDv7{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Grace <= 0 {
		o.Grace = time.Minute
	}
	if o.Batch <= 0 {
		o.Batch = 512
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Tracer == nil {
		o.Tracer = tracing.Off().Tracer()
	}
	if o.Lookahead == 0 {
		o.Lookahead = 5 * time.Second
	}
	o.Lookahead = max(o.Lookahead, 0)
	if o.Failed == nil {
		o.Failed = func(string) {}
	}
	return &Service{store: st, inv: inv, o: o, wake: loops.NewBell()}
}

// Wake makes the loop look for due work now, on this node and, with Options.Announce, on the
// others (the leader's runs it). It never blocks.
func (s *Service) Wake() {
	s.WakeLocal()
	if s.o.Announce != nil {
		s.o.Announce()
	}
}

// WakeLocal wakes this node's loop only (the wake-up hub calls it on another node's announcement).
// It never blocks.
func (s *Service) WakeLocal() { s.wake.Ring() }

// Spec is the writable part of a schedule: the body of POST and PUT, and what PATCH merges into.
// The read-only fields of the resource are accepted and ignored, so a GET body can be PUT back.
type Spec struct {
	ScheduleID        string               `json:"schedule_id,omitempty"`
	EntrypointID      string               `json:"entrypoint_id"`
	Name              string               `json:"name"`
	Timezone          string               `json:"timezone"`
	Expression        *schedule.Expression `json:"expression"`
	InputOverrides    json.RawMessage      `json:"input_overrides,omitempty"`
	MissedPolicy      string               `json:"missed_policy"`
	MaxCatchUpRuns    *int                 `json:"max_catch_up_runs,omitempty"`
	ConcurrencyPolicy string               `json:"concurrency_policy"`
	ExecutionContext  string               `json:"execution_context"`
	Status            string               `json:"status"`
	// 002's names of expression (cron only), input_overrides, status and missed_policy
	// (aliases.go).
	Cron                 string          `json:"cron,omitempty"`
	Params               json.RawMessage `json:"params,omitempty"`
	Enabled              *bool           `json:"enabled,omitempty"`
	MissedSchedulePolicy string          `json:"missed_schedule_policy,omitempty"`

	TenantID         json.RawMessage `json:"tenant_id,omitempty"`
	NextRunAt        json.RawMessage `json:"next_run_at,omitempty"`
	LastRunAt        json.RawMessage `json:"last_run_at,omitempty"`
	LastInvocationID json.RawMessage `json:"last_invocation_id,omitempty"`
	PendingCatchUp   json.RawMessage `json:"pending_catch_up_runs,omitempty"`
	CreatedBy        json.RawMessage `json:"created_by,omitempty"`
	PausedAt         json.RawMessage `json:"paused_at,omitempty"`
	CreatedAt        json.RawMessage `json:"created_at,omitempty"`
	UpdatedAt        json.RawMessage `json:"updated_at,omitempty"`
}

var (
	idPattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	statusPattern = regexp.MustCompile(`^[a-z_]+$`)
)

func invalid(path, code, format string, args ...any) *problem.Error {
	msg := fmt.Sprintf(format, args...)
	return problem.Validation(msg, []problem.Issue{{Path: path, Code: code, Message: msg}})
}

// compiled is a validated schedule with its instants.
type compiled struct {
	sch   schedule.Schedule
	times cron.Schedule
}

// Expression returns the fire instants of a schedule's expression in its timezone; errors are 422
// problems naming the field and the reason.
func Expression(e schedule.Expression, timezone string) (cron.Schedule, error) {
	c, err := cron.Parse(e.Kind, e.Value, timezone, time.Unix(0, 0).UTC())
	var ce *cron.Error
	if errors.As(err, &ce) {
		return nil, invalid("$."+ce.Field, "INVALID_VALUE", "%s: %s", ce.Field, ce.Reason)
	}
	return c, err
}

// build validates spec into a schedule of tenant (other fields from base: id, creation, run state).
func (s *Service) build(spec Spec, base schedule.Schedule) (compiled, error) {
	out := base
	if err := spec.aliases(); err != nil {
		return compiled{}, err
	}
	if spec.EntrypointID == "" {
		return compiled{}, invalid("$.entrypoint_id", "MISSING_FIELD", "entrypoint_id is required")
	}
	out.EntrypointID = spec.EntrypointID
	if spec.Expression == nil {
		return compiled{}, invalid("$.expression", "MISSING_FIELD", "expression is required: {\"kind\": \"cron\"|\"interval\", \"value\": ...}")
	}
	out.Expression = *spec.Expression
	out.Timezone = spec.Timezone
	if out.Timezone == "" {
		out.Timezone = "UTC"
	}
	times, err := Expression(out.Expression, out.Timezone)
	if err != nil {
		return compiled{}, err
	}
	out.Name = spec.Name
	if out.Name == "" {
		out.Name = out.ID
	}
	if len(out.Name) > 256 {
		return compiled{}, invalid("$.name", "INVALID_VALUE", "name must be at most 256 characters")
	}
	out.InputOverrides = spec.InputOverrides
	if len(out.InputOverrides) == 0 || string(out.InputOverrides) == "null" {
		out.InputOverrides = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(out.InputOverrides, &obj) != nil || obj == nil {
		return compiled{}, invalid("$.input_overrides", "SCHEMA_MISMATCH", "input_overrides must be a JSON object")
	}
	if out.MissedPolicy, err = oneOf("missed_policy", spec.MissedPolicy,
		schedule.MissedSkip, schedule.MissedCatchUp, schedule.MissedBackfill); err != nil {
		return compiled{}, err
	}
	out.MaxCatchUpRuns = 1
	if spec.MaxCatchUpRuns != nil {
		out.MaxCatchUpRuns = *spec.MaxCatchUpRuns
		if out.MaxCatchUpRuns < 1 || out.MaxCatchUpRuns > schedule.MaxCatchUpRuns {
			return compiled{}, invalid("$.max_catch_up_runs", "INVALID_VALUE", "max_catch_up_runs must be 1-%d", schedule.MaxCatchUpRuns)
		}
	}
	if out.ConcurrencyPolicy, err = oneOf("concurrency_policy", spec.ConcurrencyPolicy,
		schedule.ConcurrencyAllow, schedule.ConcurrencyForbid, schedule.ConcurrencyReplace); err != nil {
		return compiled{}, err
	}
	if out.ExecutionContext, err = oneOf("execution_context", spec.ExecutionContext,
		schedule.ContextSystem, schedule.ContextAPIClient, schedule.ContextUser); err != nil {
		return compiled{}, err
	}
	if out.Status, err = oneOf("status", spec.Status, schedule.StatusActive, schedule.StatusPaused, schedule.StatusDisabled); err != nil {
		return compiled{}, err
	}
	return compiled{sch: out, times: times}, nil
}

// oneOf reads an enumerated field: "" is the first allowed value (its default); anything else
// outside the list is a 422 naming the field and the values it takes.
func oneOf[T ~string](field, v string, allowed ...T) (T, error) {
	if v == "" {
		return allowed[0], nil
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if string(a) == v {
			return a, nil
		}
		names[i] = string(a)
	}
	list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return "", invalid("$."+field, "INVALID_VALUE", "%s must be %s", field, list)
}

// runAs is the identity a schedule's runs have (its execution_context).
func runAs(sch schedule.Schedule) auth.SecurityContext {
	sc := auth.SecurityContext{TenantID: sch.TenantID, SubjectID: "schedule:" + sch.ID, Roles: []auth.Role{auth.RoleOperator}}
	if sch.ExecutionContext != schedule.ContextSystem && sch.CreatedBy != "" {
		sc.SubjectID = sch.CreatedBy
	}
	return sc
}

// plan resolves the schedule's entrypoint as its runs will, with params = input_overrides (over the
// schema's defaults) and, for a manual trigger, params_override on top.
func (s *Service) plan(ctx context.Context, sch schedule.Schedule, override json.RawMessage, correlation string) (invoke.Planned, error) {
	params := sch.InputOverrides
	if len(override) > 0 && string(override) != "null" {
		merged, err := mergeObjects(params, override)
		if err != nil {
			return invoke.Planned{}, invalid("$.params_override", "SCHEMA_MISMATCH", "params_override must be a JSON object")
		}
		params = merged
	}
	return s.inv.Plan(ctx, invoke.SystemStart{As: runAs(sch), EntrypointID: sch.EntrypointID, Params: params, CorrelationID: correlation, Origin: invocation.OriginSchedule})
}

// checkPlan resolves sch's entrypoint as its runs will (plan). When the runs' identity cannot see
// it but the schedule's author can, the refusal says so: a 422 at $.execution_context naming the
// entrypoint's owner and the two ways out, not the bare 404 the runs would meet. An author who
// cannot see the entrypoint either gets the 404 (nothing is disclosed).
func (s *Service) checkPlan(ctx context.Context, sch schedule.Schedule) error {
	_, err := s.plan(ctx, sch, nil, "")
	if err == nil || sch.ExecutionContext != schedule.ContextSystem || !isNotFound(err) || sch.CreatedBy == "" {
		return asOverrides(err)
	}
	author := sch
	author.ExecutionContext = schedule.ContextUser
	if _, aerr := s.plan(ctx, author, nil, ""); isNotFound(aerr) {
		return err
	}
	msg := fmt.Sprintf("execution_context is %q: the schedule's runs start as the tenant's scheduler (subject schedule:%s), "+
		"which cannot see %s: it is private to its owner; set execution_context to \"user\" to run as %s, "+
		"or share the entrypoint (\"shared\": true)", sch.ExecutionContext, sch.ID, sch.EntrypointID, sch.CreatedBy)
	return problem.Validation(msg, []problem.Issue{{Path: "$.execution_context", Code: "ENTRYPOINT_NOT_VISIBLE", Message: msg}}).
		With("execution_context", sch.ExecutionContext)
}

// isNotFound reports whether err is a 404 problem.
func isNotFound(err error) bool {
	var pe *problem.Error
	return errors.As(err, &pe) && pe.Type == problem.TypeNotFound
}

// asOverrides makes the issues of a params validation error point at input_overrides, the field
// the params of a schedule's runs come from.
func asOverrides(err error) error {
	var pe *problem.Error
	if errors.As(err, &pe) {
		for i := range pe.Issues {
			if rest, ok := strings.CutPrefix(pe.Issues[i].Path, "$.params"); ok {
				pe.Issues[i].Path = "$.input_overrides" + rest
			}
		}
	}
	return err
}

func mergeObjects(base, over json.RawMessage) (json.RawMessage, error) {
	var a, b map[string]json.RawMessage
	if len(base) > 0 {
		if err := json.Unmarshal(base, &a); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(over, &b); err != nil || b == nil {
		return nil, errors.New("not an object")
	}
	if a == nil {
		a = map[string]json.RawMessage{}
	}
	for k, v := range b {
		a[k] = v
	}
	return json.Marshal(a)
}

// arm sets the first instant of c after now as its next run.
func (s *Service) arm(c *compiled, now time.Time) {
	c.sch.NextRunAt = nil
	if next := c.times.Next(now); !next.IsZero() {
		c.sch.NextRunAt = &next
	}
	s.setDue(&c.sch, now)
}

// setDue sets when the firing loop looks at sch next: its next instant (less the lookahead for a
// schedule whose runs may overlap), or within a poll while catch-up runs are pending; never while
// it is not active.
func (s *Service) setDue(sch *schedule.Schedule, now time.Time) {
	sch.DueAt = nil
	if sch.Status != schedule.StatusActive {
		return
	}
	if sch.NextRunAt != nil {
		due := *sch.NextRunAt
		if sch.ConcurrencyPolicy == schedule.ConcurrencyAllow {
			due = due.Add(-s.o.Lookahead)
		}
		sch.DueAt = &due
	}
	if sch.PendingCatchUpRuns > 0 {
		poll := now.Add(s.o.Poll)
		if sch.DueAt == nil || poll.Before(*sch.DueAt) {
			sch.DueAt = &poll
		}
	}
}

func canRead(sc auth.SecurityContext) error {
	return auth.RequireTenantRole(sc, auth.RoleViewer, "reading schedules")
}

func canWrite(sc auth.SecurityContext) error {
	return auth.RequireTenantRole(sc, auth.RoleDeveloper, "changing schedules")
}

// runsAsCreator reports whether sch's runs have its creator's identity (execution_context user or
// api_client): such a schedule is its creator's.
func runsAsCreator(sch schedule.Schedule) bool {
	return sch.ExecutionContext != schedule.ContextSystem && sch.CreatedBy != ""
}

// hidden reports whether sc may not know that sch exists: it runs as another subject (not sc) and
// its entrypoint is one sc cannot see (that subject's private entrypoint). Tenant admins see every
// schedule of their tenant.
func (s *Service) hidden(ctx context.Context, sc auth.SecurityContext, sch schedule.Schedule) (bool, error) {
	if !runsAsCreator(sch) || sch.CreatedBy == sc.SubjectID || sc.Has(auth.RoleAdmin) {
		return false, nil
	}
	ok, err := s.inv.CanSee(ctx, sc, sch.EntrypointID)
	return !ok, err
}

// mayAct checks that sc may trigger, change, pause, resume or delete sch: a schedule whose runs have
// its creator's identity only by its creator or a tenant admin (404 when sc may not know it
// exists, 403 otherwise); any other schedule by every developer (operator for :trigger).
func (s *Service) mayAct(ctx context.Context, sc auth.SecurityContext, sch schedule.Schedule) error {
	if !runsAsCreator(sch) || sch.CreatedBy == sc.SubjectID || sc.Has(auth.RoleAdmin) {
		return nil
	}
	hide, err := s.hidden(ctx, sc, sch)
	if err != nil {
		return problem.Internal(err)
	}
	if hide {
		return problem.NotFound("schedule %s not found", sch.ID)
	}
	return problem.Forbidden("schedule %s runs as its creator (execution_context %s): only its creator or a tenant admin may trigger, change, pause, resume or delete it",
		sch.ID, sch.ExecutionContext)
}

// checkAct reads schedule id and applies mayAct (before the transaction of an action, which
// re-checks with stillMay).
func (s *Service) checkAct(ctx context.Context, sc auth.SecurityContext, id string) error {
	cur, err := s.store.Schedule(ctx, sc.TenantID, id)
	if err != nil {
		return storeErr(id, err)
	}
	return s.mayAct(ctx, sc, cur)
}

// stillMay is mayAct inside an action's transaction, for a schedule replaced since checkAct.
func stillMay(sc auth.SecurityContext, sch schedule.Schedule) error {
	if !runsAsCreator(sch) || sch.CreatedBy == sc.SubjectID || sc.Has(auth.RoleAdmin) {
		return nil
	}
	return problem.Forbidden("schedule %s runs as its creator (execution_context %s): only its creator or a tenant admin may trigger, change, pause, resume or delete it",
		sch.ID, sch.ExecutionContext)
}

// visible returns sch, or 404 when sc may not know it exists.
func (s *Service) visible(ctx context.Context, sc auth.SecurityContext, sch schedule.Schedule) (schedule.Schedule, error) {
	hide, err := s.hidden(ctx, sc, sch)
	if err != nil {
		return schedule.Schedule{}, problem.Internal(err)
	}
	if hide {
		return schedule.Schedule{}, problem.NotFound("schedule %s not found", sch.ID)
	}
	return sch, nil
}

// writeAudit records an audit event of schedule sch in tx.
func (s *Service) writeAudit(ctx context.Context, tx store.Tx, sc auth.SecurityContext, sch schedule.Schedule, typ string, details map[string]any) error {
	d := map[string]any{"schedule_id": sch.ID, "entrypoint_id": sch.EntrypointID, "status": sch.Status}
	for k, v := range details {
		d[k] = v
	}
	ev, err := audit.WithDetails(audit.Event{ID: s.o.IDs.New("aud"), TenantID: sch.TenantID, Type: typ, ActorID: sc.SubjectID,
		ResourceType: "schedule", ResourceID: sch.ID, CorrelationID: obs.CorrelationID(ctx), At: s.o.Clock.Now()}, d)
	if err != nil {
		return err
	}
	return tx.InsertAudit(ev)
}

// storeErr maps a store error of the schedule id to its problem.
func storeErr(id string, err error) error { return resourceErr("schedule", id, err) }

// resourceErr maps a store error of a schedule or backfill to its problem: 404, 409 for a write
// that lost a race, the problem itself, or 500.
func resourceErr(kind, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return problem.NotFound("%s %s not found", kind, id)
	case errors.Is(err, store.ErrStale):
		return problem.Conflict("concurrent_update", "%s %s changed while this request was applied; retry it", kind, id)
	}
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe
	}
	return problem.Internal(err)
}

// Create registers a schedule: 201 with it. The entrypoint must exist and be callable as the
// schedule's runs will call it, with input_overrides valid params; the tenant's max_schedules applies.
func (s *Service) Create(ctx context.Context, sc auth.SecurityContext, spec Spec) (schedule.Schedule, error) {
	if err := canWrite(sc); err != nil {
		return schedule.Schedule{}, err
	}
	now := s.o.Clock.Now()
	base := schedule.Schedule{ID: spec.ScheduleID, TenantID: sc.TenantID, CreatedBy: sc.SubjectID, CreatedAt: now, UpdatedAt: now}
	if base.ID == "" {
		base.ID = s.o.IDs.New("sch")
	} else if !idPattern.MatchString(base.ID) {
		return base, invalid("$.schedule_id", "INVALID_VALUE", "schedule_id must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	c, err := s.build(spec, base)
	if err != nil {
		return base, err
	}
	if err := s.checkPlan(ctx, c.sch); err != nil {
		return base, err
	}
	s.arm(&c, now)
	if c.sch.Status == schedule.StatusPaused {
		c.sch.PausedAt = &now
	}
	policy, err := s.store.Tenant(ctx, sc.TenantID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return base, problem.Internal(err)
	}
	var perr error
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if max := policy.Quotas.MaxSchedules; max != nil {
			n, err := tx.CountTenantSchedules(sc.TenantID)
			if err != nil {
				return err
			}
			if n >= *max {
				pe := problem.New(problem.TypeQuotaExceeded, "tenant %s has reached its quota of %d schedules; delete some, or ask the operator to raise max_schedules", sc.TenantID, *max).With("quota", "max_schedules")
				pe.RetryAfter = 60
				perr = pe
				return perr
			}
		}
		if err := tx.InsertSchedule(&c.sch); err != nil {
			return err
		}
		return s.writeAudit(ctx, tx, sc, c.sch, audit.ScheduleCreated, nil)
	})
	switch {
	case perr != nil:
		return base, perr
	case errors.Is(err, store.ErrConflict):
		return base, problem.Conflict("schedule_exists", "a schedule with id %s already exists", c.sch.ID).With("schedule_id", c.sch.ID)
	case err != nil:
		return base, problem.Internal(err)
	}
	s.Wake()
	return c.sch, nil
}

// Get returns a schedule of the caller's tenant.
func (s *Service) Get(ctx context.Context, sc auth.SecurityContext, id string) (schedule.Schedule, error) {
	if err := canRead(sc); err != nil {
		return schedule.Schedule{}, err
	}
	sch, err := s.store.Schedule(ctx, sc.TenantID, id)
	if err != nil {
		return sch, storeErr(id, err)
	}
	return s.visible(ctx, sc, sch)
}

// List lists the caller's tenant's schedules.
func (s *Service) List(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[schedule.Schedule], error) {
	if err := canRead(sc); err != nil {
		return store.Page[schedule.Schedule]{}, err
	}
	page, err := s.store.ListSchedules(ctx, sc.TenantID, q)
	if err != nil {
		return page, err
	}
	// Another subject's schedules on its private entrypoints are left out (a page may then hold
	// fewer items than the limit; its cursors stay valid).
	kept := page.Items[:0]
	for _, sch := range page.Items {
		hide, err := s.hidden(ctx, sc, sch)
		if err != nil {
			return page, problem.Internal(err)
		}
		if !hide {
			kept = append(kept, sch)
		}
	}
	page.Items = kept
	return page, nil
}

// specOf is the writable part of a stored schedule (what PATCH merges into).
func specOf(sch schedule.Schedule) Spec {
	n := sch.MaxCatchUpRuns
	e := sch.Expression
	return Spec{ScheduleID: sch.ID, EntrypointID: sch.EntrypointID, Name: sch.Name, Timezone: sch.Timezone, Expression: &e,
		InputOverrides: sch.InputOverrides, MissedPolicy: string(sch.MissedPolicy), MaxCatchUpRuns: &n,
		ConcurrencyPolicy: string(sch.ConcurrencyPolicy), ExecutionContext: string(sch.ExecutionContext), Status: string(sch.Status)}
}

// Replace is PUT: the body replaces every writable field (absent ones take their defaults).
func (s *Service) Replace(ctx context.Context, sc auth.SecurityContext, id string, spec Spec) (schedule.Schedule, error) {
	return s.change(ctx, sc, id, func(schedule.Schedule) (Spec, error) { return spec, nil })
}

// Patch is PATCH: body is a JSON merge patch (RFC 7396) of the writable fields.
func (s *Service) Patch(ctx context.Context, sc auth.SecurityContext, id string, patch map[string]any, decode func([]byte, *Spec) error) (schedule.Schedule, error) {
	return s.change(ctx, sc, id, func(cur schedule.Schedule) (Spec, error) {
		var spec Spec
		raw, err := json.Marshal(specOf(cur))
		if err != nil {
			return spec, err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return spec, err
		}
		merged, err := json.Marshal(mergepatch.Apply(doc, patchAliases(patch)))
		if err != nil {
			return spec, err
		}
		return spec, decode(merged, &spec)
	})
}

// change applies an update built from the current schedule. Changes take effect from the next
// instant: a new expression, timezone or an activation arms the first instant after now.
func (s *Service) change(ctx context.Context, sc auth.SecurityContext, id string, next func(schedule.Schedule) (Spec, error)) (schedule.Schedule, error) {
	if err := canWrite(sc); err != nil {
		return schedule.Schedule{}, err
	}
	cur, err := s.store.Schedule(ctx, sc.TenantID, id)
	if err != nil {
		return cur, storeErr(id, err)
	}
	if err := s.mayAct(ctx, sc, cur); err != nil {
		return schedule.Schedule{}, err
	}
	spec, err := next(cur)
	if err != nil {
		return cur, err
	}
	if spec.ScheduleID != "" && spec.ScheduleID != cur.ID {
		return cur, invalid("$.schedule_id", "READ_ONLY", "schedule_id cannot change (it is %s)", cur.ID)
	}
	base := cur
	base.CreatedBy = sc.SubjectID
	c, err := s.build(spec, base)
	if err != nil {
		return cur, err
	}
	if err := s.checkPlan(ctx, c.sch); err != nil {
		return cur, err
	}
	now := s.o.Clock.Now()
	c.sch.UpdatedAt = now
	timing := cur.Expression != c.sch.Expression || cur.Timezone != c.sch.Timezone
	active := c.sch.Status == schedule.StatusActive
	if !active && cur.Status == schedule.StatusActive {
		c.sch.PausedAt = &now
	}
	if active {
		c.sch.PausedAt = nil
	}
	// A new timing, or an activation, arms the first instant after now; otherwise the instants not
	// handled yet (including runs queued ahead, withdrawn below) keep their place.
	rearm := timing || (active && (cur.Status != schedule.StatusActive || cur.NextRunAt == nil))
	fields, err := mergepatch.Changed(specOf(cur), specOf(c.sch))
	if err != nil {
		return schedule.Schedule{}, err
	}
	var withdrawn []string
	built := c
	err = s.store.Update(ctx, func(tx store.Tx) error {
		c = built // a run again (store.Tx) starts from the same schedule: UpdateSchedule moved its revision
		var err error
		if withdrawn, err = s.withdraw(tx, &c.sch, now); err != nil {
			return err
		}
		if rearm {
			s.arm(&c, now)
		} else {
			s.setDue(&c.sch, now)
		}
		if err := tx.UpdateSchedule(&c.sch); err != nil {
			return err
		}
		return s.writeAudit(ctx, tx, sc, c.sch, audit.ScheduleUpdated, map[string]any{"updated_fields": fields})
	})
	if err != nil {
		return cur, storeErr(id, err)
	}
	s.cancelRuns(ctx, c.sch, withdrawn)
	s.Wake()
	return c.sch, nil
}

// withdraw deletes, inside tx, the runs of sch recorded ahead of their instant (after now), and
// moves its next run back to the earliest of them; it returns their invocations, which the caller
// cancels (cancelRuns) once tx has committed. A run queued ahead reflects the schedule as it was:
// a change, a pause or a deletion takes it back.
func (s *Service) withdraw(tx store.Tx, sch *schedule.Schedule, now time.Time) ([]string, error) {
	runs, err := tx.WithdrawRuns(sch.TenantID, sch.ID, now)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		ids = append(ids, r.InvocationID)
		if sch.NextRunAt == nil || r.ScheduledAt.Before(*sch.NextRunAt) {
			at := r.ScheduledAt
			sch.NextRunAt = &at
		}
	}
	return ids, nil
}

// cancelRuns cancels the invocations of withdrawn runs (queued, not yet runnable).
func (s *Service) cancelRuns(ctx context.Context, sch schedule.Schedule, ids []string) {
	sc := auth.SecurityContext{TenantID: sch.TenantID, SubjectID: "schedule:" + sch.ID, Roles: []auth.Role{auth.RoleAdmin}}
	for _, id := range ids {
		if _, _, err := s.inv.Control(ctx, sc, id, invoke.ActionCancel); err != nil {
			s.o.Logger.Warn("schedule: cancel of a withdrawn run failed", "tenant_id", sch.TenantID, "schedule_id", sch.ID,
				"invocation_id", id, "err", err)
		}
	}
}

// Pause stops a schedule firing until Resume. Pausing a paused schedule changes nothing.
func (s *Service) Pause(ctx context.Context, sc auth.SecurityContext, id string) (schedule.Schedule, error) {
	if err := canWrite(sc); err != nil {
		return schedule.Schedule{}, err
	}
	if err := s.checkAct(ctx, sc, id); err != nil {
		return schedule.Schedule{}, err
	}
	var out schedule.Schedule
	var withdrawn []string
	err := s.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Schedule(sc.TenantID, id)
		if err != nil {
			return err
		}
		if err := stillMay(sc, cur); err != nil {
			return err
		}
		out = cur
		if cur.Status == schedule.StatusPaused {
			return nil
		}
		now := s.o.Clock.Now()
		out.Status, out.PausedAt, out.UpdatedAt = schedule.StatusPaused, &now, now
		if withdrawn, err = s.withdraw(tx, &out, now); err != nil {
			return err
		}
		s.setDue(&out, now)
		if err := tx.UpdateSchedule(&out); err != nil {
			return err
		}
		return s.writeAudit(ctx, tx, sc, out, audit.SchedulePaused, nil)
	})
	if err != nil {
		return out, storeErr(id, err)
	}
	s.cancelRuns(ctx, out, withdrawn)
	return out, nil
}

// Resumed is the answer of :resume: the schedule and how many missed runs it queued.
type Resumed struct {
	schedule.Schedule
	CatchUpRunsQueued int `json:"catch_up_runs_queued"`
}

// Resume makes a paused (or disabled) schedule active. The instants it missed meanwhile are not
// run unless catchUp is set; then they are queued as catch-up runs (run one after another) by the
// schedule's missed_policy: catch_up (and skip, which has nothing else to offer) the latest
// max_catch_up_runs of them, backfill each of them up to schedule.MaxBackfillRuns.
func (s *Service) Resume(ctx context.Context, sc auth.SecurityContext, id string, catchUp bool) (Resumed, error) {
	if err := canWrite(sc); err != nil {
		return Resumed{}, err
	}
	if err := s.checkAct(ctx, sc, id); err != nil {
		return Resumed{}, err
	}
	var out Resumed
	err := s.store.Update(ctx, func(tx store.Tx) error {
		out = Resumed{} // a run again (store.Tx) counts its catch-up runs afresh
		cur, err := tx.Schedule(sc.TenantID, id)
		if err != nil {
			return err
		}
		if err := stillMay(sc, cur); err != nil {
			return err
		}
		out.Schedule = cur
		if cur.Status == schedule.StatusActive {
			return nil
		}
		times, err := Expression(cur.Expression, cur.Timezone)
		if err != nil {
			return err
		}
		now := s.o.Clock.Now()
		c := compiled{sch: cur, times: times}
		c.sch.Status, c.sch.PausedAt, c.sch.UpdatedAt = schedule.StatusActive, nil, now
		if catchUp && cur.NextRunAt != nil {
			policy := cur.MissedPolicy
			if policy == schedule.MissedSkip {
				policy = schedule.MissedCatchUp
			}
			missed := collect(times, *cur.NextRunAt, now, keepFor(policy, cur.MaxCatchUpRuns))
			for _, at := range missed.run {
				r := schedule.Run{ID: s.o.IDs.New("run"), TenantID: cur.TenantID, ScheduleID: cur.ID, ScheduledAt: at,
					Kind: schedule.KindCatchUp, State: schedule.RunPending, RecordedAt: now}
				if err := tx.InsertScheduleRun(r); err != nil && !errors.Is(err, store.ErrConflict) {
					return err
				}
				out.CatchUpRunsQueued++
			}
			c.sch.PendingCatchUpRuns += out.CatchUpRunsQueued
		}
		s.arm(&c, now)
		if out.CatchUpRunsQueued > 0 {
			c.sch.DueAt = &now
		}
		if err := tx.UpdateSchedule(&c.sch); err != nil {
			return err
		}
		out.Schedule = c.sch
		return s.writeAudit(ctx, tx, sc, c.sch, audit.ScheduleResumed, map[string]any{"catch_up_missed": catchUp, "catch_up_runs_queued": out.CatchUpRunsQueued})
	})
	if err != nil {
		return out, storeErr(id, err)
	}
	s.Wake()
	return out, nil
}

// Deleted is the answer of DELETE.
type Deleted struct {
	ScheduleID string    `json:"schedule_id"`
	DeletedAt  time.Time `json:"deleted_at"`
	DeletedBy  string    `json:"deleted_by"`
	// Canceled counts the in-flight invocations canceled (cancel_in_flight=true).
	Canceled int `json:"canceled"`
}

// maxCancel bounds the runs DELETE ?cancel_in_flight=true looks at.
const maxCancel = 1000

// Delete deletes a schedule and its run history; its invocations stay. With cancelInFlight, the
// invocations of its latest started runs (up to 1,000) that are still in flight are canceled.
func (s *Service) Delete(ctx context.Context, sc auth.SecurityContext, id string, cancelInFlight bool) (Deleted, error) {
	if err := canWrite(sc); err != nil {
		return Deleted{}, err
	}
	if err := s.checkAct(ctx, sc, id); err != nil {
		return Deleted{}, err
	}
	now := s.o.Clock.Now()
	var started []schedule.Run
	var withdrawn []string
	var cur schedule.Schedule
	err := s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if cur, err = tx.Schedule(sc.TenantID, id); err != nil {
			return err
		}
		if err := stillMay(sc, cur); err != nil {
			return err
		}
		if withdrawn, err = s.withdraw(tx, &cur, now); err != nil {
			return err
		}
		if cancelInFlight {
			if started, err = tx.StartedRuns(sc.TenantID, id, maxCancel); err != nil {
				return err
			}
		}
		if err := tx.DeleteSchedule(sc.TenantID, id); err != nil {
			return err
		}
		return s.writeAudit(ctx, tx, sc, cur, audit.ScheduleDeleted, map[string]any{"cancel_in_flight": cancelInFlight})
	})
	if err != nil {
		return Deleted{}, storeErr(id, err)
	}
	s.cancelRuns(ctx, cur, withdrawn)
	out := Deleted{ScheduleID: id, DeletedAt: now, DeletedBy: sc.SubjectID}
	ctl := auth.SecurityContext{TenantID: sc.TenantID, SubjectID: sc.SubjectID, Roles: []auth.Role{auth.RoleAdmin}}
	for _, r := range started {
		rec, err := s.store.Invocation(ctx, sc.TenantID, r.InvocationID)
		if err != nil || rec.Status.Terminal() {
			continue
		}
		if _, _, err := s.inv.Control(ctx, ctl, r.InvocationID, invoke.ActionCancel); err == nil {
			out.Canceled++
		}
	}
	return out, nil
}

// Triggered is the answer of :trigger (202).
type Triggered struct {
	ScheduleID  string            `json:"schedule_id"`
	RunID       string            `json:"run_id"`
	Invocation  invocation.Record `json:"invocation"`
	TriggeredAt time.Time         `json:"triggered_at"`
	TriggeredBy string            `json:"triggered_by"`
	Params      json.RawMessage   `json:"params"`
}

// Trigger starts a run now, outside the schedule's cadence (also when paused): params are the
// schedule's input_overrides with override merged on top. It is a manual run: the concurrency
// policy does not stop it, and it becomes the schedule's latest run.
func (s *Service) Trigger(ctx context.Context, sc auth.SecurityContext, id string, override json.RawMessage) (Triggered, error) {
	if err := canRead(sc); err != nil {
		return Triggered{}, err
	}
	if !sc.Has(auth.RoleOperator) {
		return Triggered{}, problem.Forbidden("triggering schedules needs the operator role")
	}
	cur, err := s.store.Schedule(ctx, sc.TenantID, id)
	if err != nil {
		return Triggered{}, storeErr(id, err)
	}
	if err := s.mayAct(ctx, sc, cur); err != nil {
		return Triggered{}, err
	}
	p, err := s.plan(ctx, cur, override, obs.CorrelationID(ctx))
	if err != nil {
		return Triggered{}, err
	}
	var out Triggered
	err = s.store.Update(ctx, func(tx store.Tx) error {
		sch, err := tx.Schedule(sc.TenantID, id)
		if err != nil {
			return err
		}
		if err := stillMay(sc, sch); err != nil {
			return err
		}
		now := s.o.Clock.Now()
		r := schedule.Run{ID: s.o.IDs.New("run"), TenantID: sch.TenantID, ScheduleID: sch.ID, ScheduledAt: now,
			Kind: schedule.KindManual, State: schedule.RunStarted, InvocationID: s.inv.NewID(), RecordedAt: now}
		if err := tx.InsertScheduleRun(r); err != nil {
			return err
		}
		rec, err := s.inv.Enqueue(tx, p, r.InvocationID, now)
		if err != nil {
			return err
		}
		sch.LastInvocationID, sch.UpdatedAt = rec.ID, now
		if err := tx.UpdateSchedule(&sch); err != nil {
			return err
		}
		out = Triggered{ScheduleID: sch.ID, RunID: r.ID, Invocation: rec, TriggeredAt: now, TriggeredBy: sc.SubjectID, Params: rec.Params}
		return s.writeAudit(ctx, tx, sc, sch, audit.ScheduleTriggered, map[string]any{"invocation_id": rec.ID, "run_id": r.ID})
	})
	if err != nil {
		return Triggered{}, storeErr(id, err)
	}
	return out, nil
}

// RunView is one run of the history: the stored run with its invocation's status and times.
type RunView struct {
	schedule.Run
	Status      string            `json:"status"`
	StartedAt   *time.Time        `json:"started_at,omitempty"`
	CompletedAt *time.Time        `json:"completed_at,omitempty"`
	DurationMS  *int64            `json:"duration_ms,omitempty"`
	Error       *invocation.Error `json:"error,omitempty"`
}

// History is the answer of GET /schedules/{id}/history.
type History struct {
	Page     store.Page[RunView]
	NextRuns []time.Time
}

// HistoryRuns returns a page of a schedule's runs (newest instant first unless q orders otherwise)
// and its next instants (up to nextN; none while it is not active).
func (s *Service) History(ctx context.Context, sc auth.SecurityContext, id string, q store.ListQuery, nextN int) (History, error) {
	sch, err := s.Get(ctx, sc, id)
	if err != nil {
		return History{}, err
	}
	page, err := s.store.ScheduleRuns(ctx, sc.TenantID, id, q)
	if err != nil {
		var qe *store.QueryError
		if errors.As(err, &qe) {
			return History{}, problem.BadRequest("%s", qe.Error())
		}
		return History{}, problem.Internal(err)
	}
	out := History{Page: store.Page[RunView]{NextCursor: page.NextCursor, PrevCursor: page.PrevCursor, HasMore: page.HasMore}}
	for _, r := range page.Items {
		v := RunView{Run: r, Status: string(r.State)}
		if r.State == schedule.RunStarted {
			v.Status = r.InvocationStatus
			if v.Status == "" {
				v.Status = "purged"
			}
			if rec, err := s.store.Invocation(ctx, sc.TenantID, r.InvocationID); err == nil {
				v.Status, v.StartedAt, v.CompletedAt, v.Error = string(rec.Status), rec.StartedAt, rec.FinishedAt, rec.Error
				if rec.StartedAt != nil && rec.FinishedAt != nil {
					ms := rec.FinishedAt.Sub(*rec.StartedAt).Milliseconds()
					v.DurationMS = &ms
				}
			}
		}
		out.Page.Items = append(out.Page.Items, v)
	}
	if sch.Status == schedule.StatusActive && nextN > 0 {
		if times, err := Expression(sch.Expression, sch.Timezone); err == nil {
			from := s.o.Clock.Now()
			if sch.NextRunAt != nil && sch.NextRunAt.Before(from) {
				from = sch.NextRunAt.Add(-time.Nanosecond)
			}
			out.NextRuns = cron.NextN(times, from, nextN)
		}
	}
	return out, nil
}

// RunFilter builds the history filter of 002's query parameters (status, since, until) as an OData
// expression over the runs' fields.
func RunFilter(status, since, until string) (string, error) {
	var parts []string
	if status != "" {
		for _, st := range strings.Split(status, ",") {
			if !statusPattern.MatchString(st) {
				return "", problem.BadRequest("status: %q is not a status", st)
			}
		}
		list := "'" + strings.Join(strings.Split(status, ","), "','") + "'"
		parts = append(parts, "status in ("+list+")")
	}
	for _, b := range []struct{ name, v, op string }{{"since", since, "ge"}, {"until", until, "lt"}} {
		if b.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, b.v)
		if err != nil {
			return "", problem.BadRequest("%s must be an RFC 3339 timestamp", b.name)
		}
		parts = append(parts, "scheduled_at "+b.op+" "+t.UTC().Format(time.RFC3339Nano))
	}
	return strings.Join(parts, " and "), nil
}
