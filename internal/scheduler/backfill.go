package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/cron"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
)

// BackfillSpec is the body of POST /backfills.
type BackfillSpec struct {
	BackfillID        string          `json:"backfill_id,omitempty"`
	EntrypointID      string          `json:"entrypoint_id,omitempty"`
	ScheduleID        string          `json:"schedule_id,omitempty"`
	Start             *time.Time      `json:"start"`
	End               *time.Time      `json:"end"`
	Step              json.RawMessage `json:"step,omitempty"`
	Params            json.RawMessage `json:"params,omitempty"`
	ChunkSize         *int            `json:"chunk_size,omitempty"`
	MaxConcurrentRuns *int            `json:"max_concurrent_runs,omitempty"`
	StopOnFailure     bool            `json:"stop_on_failure,omitempty"`
	FailureThreshold  json.RawMessage `json:"failure_threshold,omitempty"`
}

// InstantParam is the params member that carries a backfill partition's instant (RFC 3339, UTC).
const InstantParam = "scheduled_at"

func instantParams(base json.RawMessage, at time.Time) (json.RawMessage, error) {
	return mergeObjects(base, json.RawMessage(`{"`+InstantParam+`":"`+at.UTC().Format(time.RFC3339)+`"}`))
}

// parseStep reads the step: an ISO 8601 interval string, or {"kind", "value", "timezone"?}.
func parseStep(raw json.RawMessage) (schedule.Step, error) {
	var st schedule.Step
	var s string
	if json.Unmarshal(raw, &s) == nil {
		st.Kind, st.Value = "interval", s
		return st, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || st.Kind == "" {
		return st, invalid("$.step", "SCHEMA_MISMATCH", `step must be an ISO 8601 interval ("P1D") or {"kind": "cron"|"interval", "value": ..., "timezone": ...}`)
	}
	return st, nil
}

func parseThreshold(raw json.RawMessage) (*schedule.Threshold, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	bad := invalid("$.failure_threshold", "INVALID_VALUE", "%s", `failure_threshold must be a count of partitions (e.g. 100) or a percentage (e.g. "10%")`)
	var n int
	if json.Unmarshal(raw, &n) == nil {
		if n < 1 {
			return nil, bad
		}
		return &schedule.Threshold{Count: n}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || !strings.HasSuffix(s, "%") {
		return nil, bad
	}
	p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || p <= 0 || p > 100 {
		return nil, bad
	}
	return &schedule.Threshold{Percent: p}, nil
}

func intIn(v *int, def, lo, hi int, path string) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < lo || *v > hi {
		return 0, invalid(path, "INVALID_VALUE", "%s must be %d-%d", strings.TrimPrefix(path, "$."), lo, hi)
	}
	return *v, nil
}

// backfillAs is the identity a backfill's invocations run as: the subject that created it.
func backfillAs(b schedule.Backfill) auth.SecurityContext {
	return auth.SecurityContext{TenantID: b.TenantID, SubjectID: b.CreatedBy, Roles: []auth.Role{auth.RoleOperator}}
}

// CreateBackfill validates spec, computes every instant of [start, end) and stores the backfill
// with one pending partition per instant (201). Its chunks start on the driver's next pass.
func (s *Service) CreateBackfill(ctx context.Context, sc auth.SecurityContext, spec BackfillSpec) (schedule.Backfill, error) {
	if err := canWrite(sc); err != nil {
		return schedule.Backfill{}, err
	}
	b, err := s.newBackfill(sc, spec)
	if err != nil {
		return b, err
	}
	if err := s.resolveTarget(ctx, sc.TenantID, spec, &b); err != nil {
		return b, err
	}
	times, err := cron.Parse(b.Step.Kind, b.Step.Value, b.Step.Timezone, b.Start)
	var ce *cron.Error
	if errors.As(err, &ce) {
		return b, invalid("$.step."+strings.TrimPrefix(ce.Field, "expression."), "INVALID_VALUE", "step: %s", ce.Reason)
	} else if err != nil {
		return b, problem.Internal(err)
	}
	if err := configure(&b.Config, spec); err != nil {
		return b, err
	}
	parts, err := backfillPartitions(times, b)
	if err != nil {
		return b, err
	}
	// The entrypoint must be callable as the backfill will call it, with valid params.
	first, err := instantParams(b.Params, parts[0].ScheduledAt)
	if err != nil {
		return b, problem.Internal(err)
	}
	if _, err := s.inv.Plan(ctx, invoke.SystemStart{As: backfillAs(b), EntrypointID: b.EntrypointID, Params: first, Origin: invocation.OriginBackfill}); err != nil {
		return b, err
	}
	b.Progress = schedule.Progress{Total: len(parts), Pending: len(parts)}
	b.Chunks = schedule.Chunks{Total: parts[len(parts)-1].Chunk + 1}
	if err := s.insertBackfill(ctx, sc, &b, parts); err != nil {
		return b, err
	}
	s.Wake()
	return b, nil
}

// newBackfill is the running backfill spec asks for, created now by sc, with its id (checked, or
// a new one) and its range [start, end) checked; what it runs is resolved later.
func (s *Service) newBackfill(sc auth.SecurityContext, spec BackfillSpec) (schedule.Backfill, error) {
	now := s.o.Clock.Now()
	b := schedule.Backfill{ID: spec.BackfillID, TenantID: sc.TenantID, CreatedBy: sc.SubjectID, CreatedAt: now, UpdatedAt: now,
		State: schedule.BackfillRunning, StartedAt: &now}
	if b.ID == "" {
		b.ID = s.o.IDs.New("bf")
	} else if !idPattern.MatchString(b.ID) {
		return b, invalid("$.backfill_id", "INVALID_VALUE", "backfill_id must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if (spec.EntrypointID == "") == (spec.ScheduleID == "") {
		return b, invalid("$.entrypoint_id", "INVALID_VALUE", "give exactly one of entrypoint_id and schedule_id")
	}
	if spec.Start == nil || spec.End == nil {
		return b, invalid("$.start", "MISSING_FIELD", "start and end are required (RFC 3339)")
	}
	b.Start, b.End = spec.Start.UTC(), spec.End.UTC()
	if !b.End.After(b.Start) {
		return b, invalid("$.end", "INVALID_VALUE", "end must be after start")
	}
	return b, nil
}

// resolveTarget sets what b runs: the entrypoint, the step and the params of the schedule
// spec names (its input overrides under spec's params) or of spec itself; a step in spec
// overrides the schedule's.
func (s *Service) resolveTarget(ctx context.Context, tenantID string, spec BackfillSpec, b *schedule.Backfill) error {
	params := spec.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil || obj == nil {
		return invalid("$.params", "SCHEMA_MISMATCH", "params must be a JSON object")
	}
	switch {
	case spec.ScheduleID != "":
		sch, err := s.store.Schedule(ctx, tenantID, spec.ScheduleID)
		if err != nil {
			return storeErr(spec.ScheduleID, err)
		}
		b.ScheduleID, b.EntrypointID = sch.ID, sch.EntrypointID
		b.Step = schedule.Step{Expression: sch.Expression, Timezone: sch.Timezone}
		if params, err = mergeObjects(sch.InputOverrides, params); err != nil {
			return problem.Internal(err)
		}
	default:
		b.EntrypointID = spec.EntrypointID
		if len(spec.Step) == 0 {
			return invalid("$.step", "MISSING_FIELD", `step is required with entrypoint_id: an ISO 8601 interval such as "P1D", or a cron expression object`)
		}
	}
	if len(spec.Step) > 0 {
		st, err := parseStep(spec.Step)
		if err != nil {
			return err
		}
		b.Step = st
	}
	b.Params = params
	return nil
}

// configure sets c from spec's chunk size, concurrency and failure policy (defaults where spec
// leaves them out), checking their ranges.
func configure(c *schedule.BackfillConfig, spec BackfillSpec) error {
	var err error
	if c.ChunkSize, err = intIn(spec.ChunkSize, schedule.DefaultChunkSize, 1, schedule.MaxChunkSize, "$.chunk_size"); err != nil {
		return err
	}
	if c.MaxConcurrentRuns, err = intIn(spec.MaxConcurrentRuns, schedule.DefaultBackfillRuns, 1, schedule.MaxBackfillRunsLimit, "$.max_concurrent_runs"); err != nil {
		return err
	}
	c.StopOnFailure = spec.StopOnFailure
	if c.FailureThreshold, err = parseThreshold(spec.FailureThreshold); err != nil {
		return err
	}
	return nil
}

// backfillPartitions is one pending partition per instant of times in b's range [start, end), in chunks
// of b's chunk size: at least one, at most schedule.MaxBackfillPartitions.
func backfillPartitions(times cron.Schedule, b schedule.Backfill) ([]schedule.Partition, error) {
	var parts []schedule.Partition
	for t := times.Next(b.Start.Add(-time.Nanosecond)); !t.IsZero() && t.Before(b.End); t = times.Next(t) {
		if len(parts) == schedule.MaxBackfillPartitions {
			return nil, invalid("$.end", "INVALID_VALUE", "the range has more than %d instants; split it into several backfills", schedule.MaxBackfillPartitions)
		}
		parts = append(parts, schedule.Partition{ID: fmt.Sprintf("p%06d", len(parts)), Seq: len(parts), ScheduledAt: t,
			Chunk: len(parts) / b.Config.ChunkSize, State: schedule.PartitionPending})
	}
	if len(parts) == 0 {
		return nil, invalid("$.end", "INVALID_VALUE", "the range [start, end) holds no instant of the step")
	}
	return parts, nil
}

// insertBackfill stores b with its partitions and the audit event of its creation, in one
// transaction. A backfill with b's id already is 409.
func (s *Service) insertBackfill(ctx context.Context, sc auth.SecurityContext, b *schedule.Backfill, parts []schedule.Partition) error {
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertBackfill(b, parts); err != nil {
			return err
		}
		return s.writeBackfillAudit(ctx, tx, sc, *b, audit.BackfillCreated, map[string]any{"partitions": len(parts)})
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		return problem.Conflict("backfill_exists", "a backfill with id %s already exists", b.ID).With("backfill_id", b.ID)
	case err != nil:
		return problem.Internal(err)
	}
	return nil
}

// writeBackfillAudit records an audit event of backfill b in tx.
func (s *Service) writeBackfillAudit(ctx context.Context, tx store.Tx, sc auth.SecurityContext, b schedule.Backfill, typ string, details map[string]any) error {
	d := map[string]any{"backfill_id": b.ID, "entrypoint_id": b.EntrypointID, "state": b.State}
	if b.ScheduleID != "" {
		d["schedule_id"] = b.ScheduleID
	}
	for k, v := range details {
		d[k] = v
	}
	ev, err := audit.WithDetails(audit.Event{ID: s.o.IDs.New("aud"), TenantID: b.TenantID, Type: typ, ActorID: sc.SubjectID,
		ResourceType: "backfill", ResourceID: b.ID, CorrelationID: obs.CorrelationID(ctx), At: s.o.Clock.Now()}, d)
	if err != nil {
		return err
	}
	return tx.InsertAudit(ev)
}

// GetBackfill returns a backfill of the caller's tenant.
func (s *Service) GetBackfill(ctx context.Context, sc auth.SecurityContext, id string) (schedule.Backfill, error) {
	if err := canRead(sc); err != nil {
		return schedule.Backfill{}, err
	}
	b, err := s.store.Backfill(ctx, sc.TenantID, id)
	return b, backfillErr(id, err)
}

func backfillErr(id string, err error) error { return resourceErr("backfill", id, err) }

// ListBackfills lists the caller's tenant's backfills.
func (s *Service) ListBackfills(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[schedule.Backfill], error) {
	if err := canRead(sc); err != nil {
		return store.Page[schedule.Backfill]{}, err
	}
	return s.store.ListBackfills(ctx, sc.TenantID, q)
}

// Partitions lists a backfill's partitions.
func (s *Service) Partitions(ctx context.Context, sc auth.SecurityContext, id string, q store.ListQuery) (store.Page[schedule.Partition], error) {
	if _, err := s.GetBackfill(ctx, sc, id); err != nil {
		return store.Page[schedule.Partition]{}, err
	}
	return s.store.BackfillPartitions(ctx, sc.TenantID, id, q)
}

// Backfill control actions.
const (
	BackfillPause  = "pause"
	BackfillResume = "resume"
	BackfillCancel = "cancel"
	BackfillRetry  = "retry"
)

// ControlBackfill applies :pause (running → paused: no chunk starts, chunks in flight finish),
// :resume (paused → running), :cancel (running or paused → canceled: pending partitions are
// skipped, running ones' invocations canceled) or :retry (failed partitions of a backfill that is
// not canceled go back to pending and it runs again). Anything else in the current state is 409.
func (s *Service) ControlBackfill(ctx context.Context, sc auth.SecurityContext, id, action string) (schedule.Backfill, error) {
	if err := canWrite(sc); err != nil {
		return schedule.Backfill{}, err
	}
	var out schedule.Backfill
	var cancel []string
	var perr error
	err := s.store.Update(ctx, func(tx store.Tx) error {
		b, err := tx.Backfill(sc.TenantID, id)
		if err != nil {
			return err
		}
		now := s.o.Clock.Now()
		typ, c, p, err := s.transition(tx, &b, action, now)
		cancel = c
		if p != nil {
			perr = p
			return perr
		}
		if err != nil {
			return err
		}
		if b.Progress, b.Chunks, err = tx.SettleBackfill(b.TenantID, b.ID); err != nil {
			return err
		}
		b.UpdatedAt = now
		if err := tx.UpdateBackfill(&b); err != nil {
			return err
		}
		out = b
		return s.writeBackfillAudit(ctx, tx, sc, b, typ, nil)
	})
	if perr != nil {
		return out, perr
	}
	if err != nil {
		return out, backfillErr(id, err)
	}
	s.cancelPartitionRuns(ctx, sc, id, cancel)
	s.Wake()
	return out, nil
}

// transition applies action to b in tx: it moves b to its new state (and its partitions, for
// :cancel and :retry) and returns the audit event type, and for :cancel the invocations of the
// partitions that were running, to cancel once tx commits. perr is the problem (409, or 400 for
// an unknown action) when action does not apply to b; nothing was written then.
func (s *Service) transition(tx store.Tx, b *schedule.Backfill, action string, now time.Time) (typ string, cancel []string, perr, err error) {
	conflict := func() error {
		return problem.Conflict("invalid_transition", "cannot %s a backfill that is %s", action, b.State).
			With("current_status", b.State).With("action", action)
	}
	switch action {
	case BackfillPause:
		if b.State != schedule.BackfillRunning {
			return "", nil, conflict(), nil
		}
		b.State, typ = schedule.BackfillPaused, audit.BackfillPaused
	case BackfillResume:
		if b.State != schedule.BackfillPaused {
			return "", nil, conflict(), nil
		}
		b.State, typ = schedule.BackfillRunning, audit.BackfillResumed
	case BackfillCancel:
		if b.State != schedule.BackfillRunning && b.State != schedule.BackfillPaused {
			return "", nil, conflict(), nil
		}
		if cancel, err = skipUnfinished(tx, *b); err != nil {
			return "", cancel, nil, err
		}
		b.State, b.CompletedAt, typ = schedule.BackfillCanceled, &now, audit.BackfillCanceled
	case BackfillRetry:
		if b.State == schedule.BackfillCanceled {
			return "", nil, conflict(), nil
		}
		if perr, err = retryFailed(tx, b); perr != nil || err != nil {
			return "", nil, perr, err
		}
		typ = audit.BackfillRetried
	default:
		return "", nil, problem.Validation("unknown action", []problem.Issue{{Path: "$", Code: "INVALID_VALUE",
			Message: fmt.Sprintf("unknown backfill action %q: use pause, resume, cancel or retry", action)}}), nil
	}
	return typ, cancel, nil, nil
}

// skipUnfinished skips b's pending and running partitions (for :cancel), and returns the
// invocations of the running ones.
func skipUnfinished(tx store.Tx, b schedule.Backfill) ([]string, error) {
	if _, err := tx.SetPartitions(store.PartitionMove{TenantID: b.TenantID, BackfillID: b.ID, From: schedule.PartitionPending, To: schedule.PartitionSkipped}); err != nil {
		return nil, err
	}
	return tx.SetPartitions(store.PartitionMove{TenantID: b.TenantID, BackfillID: b.ID, From: schedule.PartitionRunning, To: schedule.PartitionSkipped})
}

// retryFailed moves b's failed partitions back to pending (for :retry) and b back to running,
// unless it is paused. perr (409): b has no failed partitions; nothing was written.
func retryFailed(tx store.Tx, b *schedule.Backfill) (perr, err error) {
	settled, _, err := tx.SettleBackfill(b.TenantID, b.ID)
	if err != nil {
		return nil, err
	}
	if settled.Failed == 0 {
		return problem.Conflict("nothing_to_retry", "backfill %s has no failed partitions", b.ID).With("current_status", b.State), nil
	}
	if _, err := tx.SetPartitions(store.PartitionMove{TenantID: b.TenantID, BackfillID: b.ID, From: schedule.PartitionFailed, To: schedule.PartitionPending}); err != nil {
		return nil, err
	}
	if b.State != schedule.BackfillPaused {
		b.State = schedule.BackfillRunning
	}
	b.FailureReason, b.CompletedAt = "", nil
	return nil, nil
}

// cancelPartitionRuns cancels, once :cancel committed, the invocations of the partitions that
// were running; a cancel that fails is logged.
func (s *Service) cancelPartitionRuns(ctx context.Context, sc auth.SecurityContext, id string, cancel []string) {
	ctl := auth.SecurityContext{TenantID: sc.TenantID, SubjectID: sc.SubjectID, Roles: []auth.Role{auth.RoleAdmin}}
	for _, inv := range cancel {
		if _, _, err := s.inv.Control(ctx, ctl, inv, invoke.ActionCancel); err != nil {
			s.o.Logger.Warn("backfill cancel: cancel of a running partition failed", "tenant_id", sc.TenantID, "backfill_id", id,
				"invocation_id", inv, "err", err)
		}
	}
}

// maxDriven bounds the backfills one driver pass looks at.
const maxDriven = 100

// DriveBackfills makes one pass over the running and paused backfills: it settles partitions whose
// invocations finished (paused ones: only that), ends backfills that are done (or failed past their threshold), and starts
// pending chunks while fewer than max_concurrent_runs are in flight. It returns the partitions it
// started. Run calls it every poll; tests call it after moving a fake clock. A backfill that cannot
// be driven is logged with its tenant id and counted (Options.Failed), and the pass goes on with the
// next one; the error joins those failures.
func (s *Service) DriveBackfills(ctx context.Context) (int, error) {
	running, err := s.store.ActiveBackfills(ctx, maxDriven)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, k := range running {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := s.drive(ctx, k[0], k[1])
		total += n
		if err != nil && !errors.Is(err, store.ErrStale) {
			if ctx.Err() != nil {
				return total, err
			}
			// One backfill that cannot be driven must not stop the others (of every tenant).
			s.o.Failed(JobBackfill)
			s.o.Logger.Error("driving a backfill failed", "tenant_id", k[0], "backfill_id", k[1], "err", err)
			errs = append(errs, fmt.Errorf("backfill %s/%s: %w", k[0], k[1], err))
		}
	}
	return total, errors.Join(errs...)
}

// drive advances one backfill: a settling transaction, then (outside it) the pending chunks to
// start and their plans, then a transaction that starts them if the backfill did not change.
func (s *Service) drive(ctx context.Context, tenantID, id string) (int, error) {
	b, free, err := s.settleBackfill(ctx, tenantID, id)
	if err != nil || free <= 0 || b.State != schedule.BackfillRunning {
		return 0, err
	}
	chunks, err := s.store.PendingChunks(ctx, tenantID, id, free)
	if err != nil || len(chunks) == 0 {
		return 0, err
	}
	// Plan every partition (each has its own params: the instant), each in a span of its own, the
	// root of its invocation's trace (ended once the partitions are recorded, or not).
	parts, plans, spans, err := s.planPartitions(ctx, b, chunks)
	queued := false
	defer func() {
		for _, sp := range spans {
			if !queued {
				sp.SetStatus(codes.Error, "not queued")
			}
			sp.End()
		}
	}()
	if err != nil {
		return 0, err
	}
	n, err := s.startPartitions(ctx, b, parts, plans)
	if err != nil {
		return 0, err
	}
	queued = true
	return n, nil
}

// settleBackfill is drive's settling transaction: it counts the backfill's partitions whose
// invocations finished and ends it if it is done or failed past its threshold. It returns the
// backfill and how many more chunks may start (running backfills only).
func (s *Service) settleBackfill(ctx context.Context, tenantID, id string) (schedule.Backfill, int, error) {
	var b schedule.Backfill
	free := 0
	err := s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if b, err = tx.Backfill(tenantID, id); err != nil {
			return err
		}
		now := s.o.Clock.Now()
		before, beforeChunks := b.Progress, b.Chunks
		if b.Progress, b.Chunks, err = tx.SettleBackfill(tenantID, id); err != nil {
			return err
		}
		if b.State != schedule.BackfillRunning {
			if b.Progress == before && b.Chunks == beforeChunks {
				return nil // paused, and nothing finished since the last pass
			}
			b.UpdatedAt = now
			return tx.UpdateBackfill(&b)
		}
		if free, err = s.conclude(tx, &b, now); err != nil {
			return err
		}
		b.UpdatedAt = now
		return tx.UpdateBackfill(&b)
	})
	return b, free, err
}

// conclude ends the running, just settled backfill b when it failed past its threshold (its
// pending partitions skipped) or has nothing left to run; otherwise it returns how many more
// chunks may start.
func (s *Service) conclude(tx store.Tx, b *schedule.Backfill, now time.Time) (int, error) {
	p := b.Progress
	switch {
	case failedPast(*b):
		if _, err := tx.SetPartitions(store.PartitionMove{TenantID: b.TenantID, BackfillID: b.ID, From: schedule.PartitionPending, To: schedule.PartitionSkipped}); err != nil {
			return 0, err
		}
		var err error
		if b.Progress, b.Chunks, err = tx.SettleBackfill(b.TenantID, b.ID); err != nil {
			return 0, err
		}
		b.State, b.CompletedAt = schedule.BackfillFailed, &now
		b.FailureReason = fmt.Sprintf("%d of %d partitions failed (stop_on_failure %v, failure_threshold %s): the pending ones were skipped",
			p.Failed, p.Total, b.Config.StopOnFailure, thresholdText(b.Config.FailureThreshold))
	case p.Pending == 0 && p.Running == 0:
		b.State, b.CompletedAt = schedule.BackfillSucceeded, &now
		if p.Failed > 0 {
			b.State = schedule.BackfillFailed
			b.FailureReason = fmt.Sprintf("%d of %d partitions failed; :retry runs them again", p.Failed, p.Total)
		}
	default:
		return b.Config.MaxConcurrentRuns - b.Chunks.InFlight, nil
	}
	return 0, nil
}

// planPartitions plans the invocation of every partition of chunks, each with its instant in its
// params and a new invocation id, in a span of its own (returned, to be ended by the caller, also
// on failure). A partition that cannot be planned fails the backfill.
func (s *Service) planPartitions(ctx context.Context, b schedule.Backfill, chunks map[int][]schedule.Partition) ([]schedule.Partition, map[string]invoke.Planned, []trace.Span, error) {
	var parts []schedule.Partition
	plans := map[string]invoke.Planned{}
	var spans []trace.Span
	for _, list := range chunks {
		for _, p := range list {
			params, err := instantParams(b.Params, p.ScheduledAt)
			if err != nil {
				return nil, nil, spans, err
			}
			p.InvocationID = s.inv.NewID()
			pctx, span := s.o.Tracer.Start(ctx, SpanBackfill, trace.WithAttributes(tracing.AttrTenant.String(b.TenantID),
				tracing.AttrBackfill.String(b.ID), tracing.AttrScheduledAt.String(p.ScheduledAt.UTC().Format(time.RFC3339Nano)),
				tracing.AttrInvocation.String(p.InvocationID)))
			spans = append(spans, span)
			pl, err := s.inv.Plan(pctx, invoke.SystemStart{As: backfillAs(b), EntrypointID: b.EntrypointID, Params: params, Origin: invocation.OriginBackfill})
			if err != nil {
				return nil, nil, spans, s.failBackfill(ctx, b, fmt.Sprintf("partition %s cannot start: %v", p.ScheduledAt.Format(time.RFC3339), err))
			}
			plans[p.ID] = pl
			parts = append(parts, p)
		}
	}
	return parts, plans, spans, nil
}

// startPartitions is drive's starting transaction: unless b was paused, canceled or changed since
// it settled (ErrStale), it marks parts running, queues their planned invocations and settles b
// again. It returns the invocations queued.
func (s *Service) startPartitions(ctx context.Context, b schedule.Backfill, parts []schedule.Partition, plans map[string]invoke.Planned) (int, error) {
	tenantID, id := b.TenantID, b.ID
	var created []invocation.Record
	err := s.store.Update(ctx, func(tx store.Tx) error {
		created = created[:0]
		cur, err := tx.Backfill(tenantID, id)
		if err != nil {
			return err
		}
		if cur.Revision != b.Revision || cur.State != schedule.BackfillRunning {
			return store.ErrStale // paused, canceled or changed meanwhile: the next pass decides again
		}
		now := s.o.Clock.Now()
		if _, err := tx.StartPartitions(tenantID, id, parts); err != nil {
			return err
		}
		for _, p := range parts {
			rec, err := s.inv.Enqueue(tx, plans[p.ID], p.InvocationID, now)
			if err != nil {
				return err
			}
			created = append(created, rec)
		}
		if cur.Progress, cur.Chunks, err = tx.SettleBackfill(tenantID, id); err != nil {
			return err
		}
		cur.UpdatedAt = now
		return tx.UpdateBackfill(&cur)
	})
	return len(created), err
}

// failBackfill ends a backfill whose partitions cannot start (its entrypoint went away).
func (s *Service) failBackfill(ctx context.Context, b schedule.Backfill, reason string) error {
	return s.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Backfill(b.TenantID, b.ID)
		if err != nil || cur.State != schedule.BackfillRunning {
			return err
		}
		if _, err := tx.SetPartitions(store.PartitionMove{TenantID: b.TenantID, BackfillID: b.ID, From: schedule.PartitionPending, To: schedule.PartitionSkipped}); err != nil {
			return err
		}
		now := s.o.Clock.Now()
		if cur.Progress, cur.Chunks, err = tx.SettleBackfill(b.TenantID, b.ID); err != nil {
			return err
		}
		cur.State, cur.CompletedAt, cur.UpdatedAt, cur.FailureReason = schedule.BackfillFailed, &now, now, reason
		s.o.Logger.Warn("backfill failed", "tenant_id", b.TenantID, "backfill_id", b.ID, "reason", reason)
		return tx.UpdateBackfill(&cur)
	})
}

// failedPast reports whether b's failures reached stop_on_failure or its failure_threshold.
func failedPast(b schedule.Backfill) bool {
	f := b.Progress.Failed
	if f == 0 {
		return false
	}
	if b.Config.StopOnFailure {
		return true
	}
	th := b.Config.FailureThreshold
	switch {
	case th == nil:
		return false
	case th.Count > 0:
		return f >= th.Count
	default:
		return float64(f) >= math.Ceil(th.Percent/100*float64(b.Progress.Total))
	}
}

func thresholdText(th *schedule.Threshold) string {
	switch {
	case th == nil:
		return "none"
	case th.Count > 0:
		return strconv.Itoa(th.Count)
	default:
		return strconv.FormatFloat(th.Percent, 'f', -1, 64) + "%"
	}
}
