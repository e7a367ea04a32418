package larkclient

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Invocation is 000's InvocationRecord (docs/api.md §7).
type Invocation struct {
	Raw
	InvocationID      string          `json:"invocation_id"`      // inv_…
	EntrypointID      string          `json:"entrypoint_id"`      // the exact version it runs (pinned for its whole life)
	EntrypointVersion string          `json:"entrypoint_version"` // MAJOR.MINOR.PATCH of that version
	Status            string          `json:"status"`             // queued, running, suspended, succeeded, failed, canceled, compensating, compensated or dead_lettered
	Mode              string          `json:"mode"`               // sync or async
	Params            json.RawMessage `json:"params"`             // the params, with the schema defaults applied
	Result            json.RawMessage `json:"result"`             // the result once succeeded (JSON null before)
	// Error is set when the invocation failed.
	Error *InvocationError `json:"error"`
	// Timestamps are when it was created, started, suspended and finished.
	Timestamps struct {
		CreatedAt   time.Time  `json:"created_at"`
		StartedAt   *time.Time `json:"started_at"`
		SuspendedAt *time.Time `json:"suspended_at"`
		FinishedAt  *time.Time `json:"finished_at"`
	} `json:"timestamps"`
	// Attempt is the logical attempt.
	Attempt int `json:"attempt"`
	// ReplayOf is the invocation this one replays.
	ReplayOf string `json:"replay_of,omitempty"`
}

// Terminal reports whether the status is final: succeeded, failed, canceled, compensated or
// dead_lettered.
func (i *Invocation) Terminal() bool { return TerminalStatus(i.Status) }

// TerminalStatus reports whether an invocation status is final.
func TerminalStatus(s string) bool {
	switch s {
	case "succeeded", "failed", "canceled", "compensated", "dead_lettered":
		return true
	}
	return false
}

// InvocationError is an invocation's error.
type InvocationError struct {
	TypeID   string          `json:"error_type_id"`     // the GTS error type id
	Message  string          `json:"message"`           // what went wrong
	Category string          `json:"category"`          // retryable, non_retryable, timeout, canceled, …
	Details  json.RawMessage `json:"details,omitempty"` // extra members of the error, if any
}

// StartInvocation is the body of POST /invocations plus its headers.
type StartInvocation struct {
	// EntrypointID is the GTS id to run (a major-only id resolves to the latest active minor).
	EntrypointID string `json:"entrypoint_id"`
	// Mode is sync or async; empty takes the entrypoint's default.
	Mode string `json:"mode,omitempty"`
	// Params is a JSON object; nil sends none ({}).
	Params json.RawMessage `json:"params,omitempty"`
	// DryRun validates without running.
	DryRun bool `json:"dry_run,omitempty"`
	// IdempotencyKey, when set, is sent as the Idempotency-Key header.
	IdempotencyKey string `json:"-"`
}

// InvocationResult is 000's InvocationResult, the answer of a start.
type InvocationResult struct {
	Raw
	Record Invocation `json:"record"`  // the invocation (a synthetic dryrun_ record for dry runs)
	DryRun bool       `json:"dry_run"` // true for a dry run: nothing was stored or run
	Cached bool       `json:"cached"`  // true when a cached result answered
	// Replayed is true when an Idempotency-Key returned an earlier invocation.
	Replayed bool `json:"-"`
	// Accepted is true for a 202 answer (async, or a sync workflow not ended in time).
	Accepted bool `json:"-"`
}

// TimelineEntry is one entry of an invocation's timeline.
type TimelineEntry struct {
	Raw
	Seq        int64           `json:"seq"`         // position in the log: 1, 2, … without gaps
	At         time.Time       `json:"at"`          // when it happened (never before the previous entry)
	EventType  string          `json:"event_type"`  // created, started, step_started, suspended, succeeded, …
	Status     string          `json:"status"`      // the invocation's status after the entry
	StepName   *string         `json:"step_name"`   // the workflow step, for step entries
	DurationMS *int64          `json:"duration_ms"` // how long the step or attempt took, when known
	Message    *string         `json:"message"`     // a log line or error message
	Details    json.RawMessage `json:"details"`     // event-specific members
	Attempt    int             `json:"attempt"`     // the logical attempt it belongs to
}

// Timeline is one page of an invocation's timeline.
type Timeline struct {
	Raw
	InvocationID string          `json:"invocation_id"` // the invocation
	Status       string          `json:"status"`        // the invocation's current status
	Items        []TimelineEntry `json:"items"`         // the entries of this page, in log order
	PageInfo     PageInfo        `json:"page_info"`     // cursors to the next and previous pages
}

// StartInvocation starts an invocation, sync or async.
func (c *Client) StartInvocation(ctx context.Context, s StartInvocation) (*InvocationResult, error) {
	h := http.Header{}
	if s.IdempotencyKey != "" {
		h.Set("Idempotency-Key", s.IdempotencyKey)
	}
	var r InvocationResult
	res, err := c.call(ctx, request{method: http.MethodPost, path: "/invocations", body: s, header: h}, &r)
	if err != nil {
		return nil, err
	}
	r.Record.setRaw(extract(r.JSON, "record"))
	r.Replayed = res.header.Get("Idempotency-Replayed") == "true"
	r.Accepted = res.status == http.StatusAccepted
	return &r, nil
}

// extract returns the raw JSON of one member of an object (nil when absent).
func extract(obj json.RawMessage, member string) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil
	}
	return m[member]
}

// GetInvocation returns one invocation.
func (c *Client) GetInvocation(ctx context.Context, id string) (*Invocation, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var i Invocation
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/invocations/" + esc(id)}, &i); err != nil {
		return nil, err
	}
	return &i, nil
}

// ListInvocations returns one page of invocations (default order: newest first). Filter fields:
// entrypoint_id, status, mode, correlation_id, created_at.
func (c *Client) ListInvocations(ctx context.Context, opts ListOptions) (*Page[Invocation], error) {
	return listPage[Invocation](ctx, c, "/invocations", opts.values())
}

// AllInvocations iterates every invocation matching opts.
func (c *Client) AllInvocations(ctx context.Context, opts ListOptions) iter.Seq2[Invocation, error] {
	return all(ctx, opts, c.ListInvocations)
}

// InvocationTimeline returns one page of an invocation's timeline, from cursor ("" for the first);
// limit 0 takes the server's default.
func (c *Client) InvocationTimeline(ctx context.Context, id, cursor string, limit int) (*Timeline, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var t Timeline
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/invocations/" + esc(id) + "/timeline", query: q}, &t); err != nil {
		return nil, err
	}
	raws := extractItems(t.JSON)
	for i := range t.Items {
		if i < len(raws) {
			t.Items[i].setRaw(raws[i])
		}
	}
	return &t, nil
}

func extractItems(obj json.RawMessage) []json.RawMessage {
	var v struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(obj, &v); err != nil {
		return nil
	}
	return v.Items
}

// ControlInvocation runs a control action: cancel, retry, replay, suspend or resume. It returns
// the invocation's record (for replay, the new invocation's).
func (c *Client) ControlInvocation(ctx context.Context, id, action string) (*Invocation, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	res, err := c.do(ctx, request{method: http.MethodPost, path: "/invocations/" + esc(id) + ":control",
		body: map[string]string{"action": action}})
	if err != nil {
		return nil, err
	}
	body := res.body
	if rec := extract(body, "record"); rec != nil {
		body = rec
	}
	var i Invocation
	if err := decode(body, &i); err != nil {
		return nil, err
	}
	return &i, nil
}

// CancelInvocation cancels a queued or running invocation.
func (c *Client) CancelInvocation(ctx context.Context, id string) (*Invocation, error) {
	return c.ControlInvocation(ctx, id, "cancel")
}

// RetryInvocation re-queues a failed or dead-lettered invocation as its next attempt.
func (c *Client) RetryInvocation(ctx context.Context, id string) (*Invocation, error) {
	return c.ControlInvocation(ctx, id, "retry")
}

// ReplayInvocation starts a new invocation with the same params and pinned version.
func (c *Client) ReplayInvocation(ctx context.Context, id string) (*Invocation, error) {
	return c.ControlInvocation(ctx, id, "replay")
}
