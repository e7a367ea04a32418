package larkclient

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// Schedule is a schedule (docs/schedules.md).
type Schedule struct {
	Raw
	ScheduleID   string `json:"schedule_id"`   // the id (client-given or sch_…)
	Name         string `json:"name"`          // the display name (defaults to the id)
	EntrypointID string `json:"entrypoint_id"` // what each run invokes
	// Expression is {"kind": "cron"|"interval", "value": "…"}.
	Expression struct {
		Kind  string `json:"kind"`
		Value string `json:"value"`
	} `json:"expression"`
	Timezone  string     `json:"timezone"`    // the IANA zone cron fields are read in
	Status    string     `json:"status"`      // active, paused or disabled
	NextRunAt *time.Time `json:"next_run_at"` // the next instant it fires, if any
	LastRunAt *time.Time `json:"last_run_at"` // the latest instant that started a run
}

// ScheduleRun is one item of a schedule's history.
type ScheduleRun struct {
	Raw
	RunID        string     `json:"run_id"`                  // run_…
	ScheduledAt  time.Time  `json:"scheduled_at"`            // the instant (for manual runs: when triggered)
	Kind         string     `json:"kind"`                    // scheduled, catch_up or manual
	Status       string     `json:"status"`                  // the invocation's status, or pending or skipped
	SkipReason   string     `json:"skip_reason,omitempty"`   // why a skipped run did not start
	InvocationID string     `json:"invocation_id,omitempty"` // the invocation it started, if any
	StartedAt    *time.Time `json:"started_at,omitempty"`    // when the invocation started
	DurationMS   *int64     `json:"duration_ms,omitempty"`   // how long the invocation ran
}

// ScheduleTrigger is the answer of POST /schedules/{id}:trigger.
type ScheduleTrigger struct {
	Raw
	ScheduleID string     `json:"schedule_id"` // the schedule
	RunID      string     `json:"run_id"`      // the manual run recorded
	Invocation Invocation `json:"invocation"`  // the invocation it started
}

// ListSchedules returns one page of the tenant's schedules.
func (c *Client) ListSchedules(ctx context.Context, opts ListOptions) (*Page[Schedule], error) {
	return listPage[Schedule](ctx, c, "/schedules", opts.values())
}

// AllSchedules iterates every schedule matching opts.
func (c *Client) AllSchedules(ctx context.Context, opts ListOptions) iter.Seq2[Schedule, error] {
	return all(ctx, opts, c.ListSchedules)
}

// GetSchedule returns one schedule.
func (c *Client) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	return c.scheduleCall(ctx, http.MethodGet, id, "", nil)
}

// CreateSchedule creates a schedule from its body.
func (c *Client) CreateSchedule(ctx context.Context, body json.RawMessage) (*Schedule, error) {
	var s Schedule
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/schedules", body: body}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ReplaceSchedule replaces a schedule's writable fields (PUT).
func (c *Client) ReplaceSchedule(ctx context.Context, id string, body json.RawMessage) (*Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPut, id, "", body)
}

// PauseSchedule stops a schedule firing.
func (c *Client) PauseSchedule(ctx context.Context, id string) (*Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPost, id, ":pause", nil)
}

// ResumeSchedule re-arms a paused schedule; catchUp runs the instants missed while paused.
func (c *Client) ResumeSchedule(ctx context.Context, id string, catchUp bool) (*Schedule, error) {
	var body any
	if catchUp {
		body = map[string]bool{"catch_up_missed": true}
	}
	return c.scheduleCall(ctx, http.MethodPost, id, ":resume", body)
}

// DeleteSchedule deletes a schedule and its run history.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	if err := need(id); err != nil {
		return err
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/schedules/" + esc(id)})
	return err
}

func (c *Client) scheduleCall(ctx context.Context, method, id, verb string, body any) (*Schedule, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var s Schedule
	if _, err := c.call(ctx, request{method: method, path: "/schedules/" + esc(id) + verb, body: body}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// TriggerSchedule runs a schedule now; paramsOverride (may be nil) replaces its params.
func (c *Client) TriggerSchedule(ctx context.Context, id string, paramsOverride json.RawMessage) (*ScheduleTrigger, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var body any
	if paramsOverride != nil {
		body = map[string]json.RawMessage{"params_override": paramsOverride}
	}
	var t ScheduleTrigger
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/schedules/" + esc(id) + ":trigger", body: body}, &t); err != nil {
		return nil, err
	}
	t.Invocation.setRaw(extract(t.JSON, "invocation"))
	return &t, nil
}

// ScheduleHistory returns one page of a schedule's runs, newest first.
func (c *Client) ScheduleHistory(ctx context.Context, id string, opts ListOptions) (*Page[ScheduleRun], error) {
	if err := need(id); err != nil {
		return nil, err
	}
	return listPage[ScheduleRun](ctx, c, "/schedules/"+esc(id)+"/history", opts.values())
}

// Backfill is a backfill (docs/schedules.md, Backfills).
type Backfill struct {
	Raw
	BackfillID   string `json:"backfill_id"`           // the id (client-given or bf_…)
	EntrypointID string `json:"entrypoint_id"`         // what each partition invokes
	ScheduleID   string `json:"schedule_id,omitempty"` // the schedule it replays, if any
	// State is running, paused, succeeded, failed or canceled.
	State string `json:"state"`
	// Progress counts the partitions.
	Progress struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
		Skipped   int `json:"skipped"`
		Pending   int `json:"pending"`
		Running   int `json:"running"`
	} `json:"progress"`
	FailureReason string `json:"failure_reason,omitempty"` // why it failed, when it did
}

// Done reports whether the backfill is in a final state.
func (b *Backfill) Done() bool {
	return b.State == "succeeded" || b.State == "failed" || b.State == "canceled"
}

// CreateBackfill creates a backfill from its body.
func (c *Client) CreateBackfill(ctx context.Context, body json.RawMessage) (*Backfill, error) {
	var b Backfill
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/backfills", body: body}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// ListBackfills returns one page of the tenant's backfills.
func (c *Client) ListBackfills(ctx context.Context, opts ListOptions) (*Page[Backfill], error) {
	return listPage[Backfill](ctx, c, "/backfills", opts.values())
}

// GetBackfill returns a backfill with its progress.
func (c *Client) GetBackfill(ctx context.Context, id string) (*Backfill, error) {
	return c.backfillCall(ctx, http.MethodGet, id, "")
}

// PauseBackfill stops starting new chunks.
func (c *Client) PauseBackfill(ctx context.Context, id string) (*Backfill, error) {
	return c.backfillCall(ctx, http.MethodPost, id, ":pause")
}

// ResumeBackfill resumes a paused backfill.
func (c *Client) ResumeBackfill(ctx context.Context, id string) (*Backfill, error) {
	return c.backfillCall(ctx, http.MethodPost, id, ":resume")
}

// CancelBackfill cancels a backfill.
func (c *Client) CancelBackfill(ctx context.Context, id string) (*Backfill, error) {
	return c.backfillCall(ctx, http.MethodPost, id, ":cancel")
}

// RetryBackfill sends the failed partitions back to pending.
func (c *Client) RetryBackfill(ctx context.Context, id string) (*Backfill, error) {
	return c.backfillCall(ctx, http.MethodPost, id, ":retry")
}

func (c *Client) backfillCall(ctx context.Context, method, id, verb string) (*Backfill, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var b Backfill
	if _, err := c.call(ctx, request{method: method, path: "/backfills/" + esc(id) + verb}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Usage is the answer of GET /tenants/{tenant_id}/usage.
type Usage struct {
	Raw
	TenantID string `json:"tenant_id"` // the tenant
	// Current holds the current counts.
	Current map[string]float64 `json:"current"`
	// Quotas holds the quotas that are set.
	Quotas map[string]float64 `json:"quotas"`
	// UtilizationPercent is current/quota × 100 per quota.
	UtilizationPercent map[string]float64 `json:"utilization_percent"`
}

// TenantUsage returns a tenant's current usage and quotas (admin of the tenant).
func (c *Client) TenantUsage(ctx context.Context, tenantID string) (*Usage, error) {
	if err := need(tenantID); err != nil {
		return nil, err
	}
	var u Usage
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/tenants/" + esc(tenantID) + "/usage"}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// TenantUsageHistory returns the usage buckets of a tenant: granularity hourly, daily or weekly
// ("" for the default), start and end as RFC 3339 ("" for the defaults).
func (c *Client) TenantUsageHistory(ctx context.Context, tenantID, granularity, start, end string) (json.RawMessage, error) {
	if err := need(tenantID); err != nil {
		return nil, err
	}
	q := url.Values{}
	for k, v := range map[string]string{"granularity": granularity, "start": start, "end": end} {
		if v != "" {
			q.Set(k, v)
		}
	}
	res, err := c.do(ctx, request{method: http.MethodGet, path: "/tenants/" + esc(tenantID) + "/usage/history", query: q})
	if err != nil {
		return nil, err
	}
	return res.body, nil
}
