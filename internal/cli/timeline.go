package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/larkrun/lark/pkg/larkclient"
)

// timelineLine renders one timeline entry: its seq, time, event type and status, then its step
// and the cause its details carry (an error, a retry's delay and next attempt, a suspension's
// until, a resume's reason…), so that a reader sees why without -o json.
func timelineLine(e larkclient.TimelineEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%4d  %s  %-22s %-13s", e.Seq, clock(e.At), e.EventType, e.Status)
	task := strings.HasPrefix(e.EventType, "task_")
	if e.StepName != nil && *e.StepName != "" {
		if task {
			fmt.Fprintf(&b, " task=%s", *e.StepName)
		} else {
			fmt.Fprintf(&b, " step=%s", *e.StepName)
		}
	}
	if task || e.EventType == "dag_planned" {
		b.WriteString(dagDetails(e.Details))
	} else if c := entryCause(e); c != "" {
		b.WriteString(" " + c)
	}
	if e.DurationMS != nil {
		fmt.Fprintf(&b, " (%dms)", *e.DurationMS)
	}
	if e.Message != nil && *e.Message != "" {
		fmt.Fprintf(&b, " %s", strings.ReplaceAll(*e.Message, "\n", " "))
	}
	return strings.TrimRight(b.String(), " ")
}

// clock formats a timeline time: UTC, to the millisecond, with its zone.
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000Z") }

// entryDetails are the members of timeline details the CLI shows (docs/api.md, "GET
// /invocations/{id}/timeline"). Error is an object for failures and retries, a string (the egress
// error kind) for http_call; Result is a step's struct(ok, value | error).
type entryDetails struct {
	Error       json.RawMessage `json:"error"`
	DelayMS     *int64          `json:"delay_ms"`
	AvailableAt *time.Time      `json:"available_at"`
	NextAttempt int             `json:"next_attempt"`
	Attempt     int             `json:"attempt"`
	Until       *time.Time      `json:"until"`
	Reason      string          `json:"reason"`
	Helper      string          `json:"helper"`
	Key         string          `json:"key"`
	Timeout     bool            `json:"timeout"`
	Result      json.RawMessage `json:"result"`
	Method      string          `json:"method"`
	Host        string          `json:"host"`
	Status      int             `json:"status"`
	Trigger     string          `json:"trigger"`
	Handler     string          `json:"handler"`
	HandlerInv  string          `json:"handler_invocation_id"`
	HandlerStat string          `json:"handler_status"`
	Child       string          `json:"child_invocation_id"`
	ChildStatus string          `json:"child_status"`
	Entrypoint  string          `json:"entrypoint_id"`
	EventID     string          `json:"event_id"`
	EventType   string          `json:"event_type_id"`
	Action      string          `json:"action"`
	OK          *bool           `json:"ok"`
}

// entryCause renders what an entry's details say about why: "" when they say nothing more.
func entryCause(e larkclient.TimelineEntry) string {
	var d entryDetails
	if len(e.Details) == 0 || json.Unmarshal(e.Details, &d) != nil {
		return ""
	}
	switch e.EventType {
	case "step_retried":
		return retryCause(e, d)
	case "step_started":
		if d.Attempt > 1 {
			return fmt.Sprintf("attempt %d", d.Attempt)
		}
	case "step_failed":
		var r struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(d.Result, &r) == nil {
			return errorText(r.Error)
		}
	case "failed", "dead_lettered", "canceled", "late_result":
		return joinNonEmpty(errorText(d.Error), reasonText(d.Reason))
	case "suspended":
		return suspendCause(d)
	case "resumed", "reclaimed":
		return reasonText(d.Reason)
	case "requeued":
		return d.Action
	case "http_call":
		return httpCause(d)
	case "journal":
		return joinNonEmpty(strings.TrimSpace(d.Helper+" "+d.Key), untilText(d.Until))
	case "journal_resolved":
		if d.Timeout {
			return "timed out"
		}
	default:
		return otherCause(e.EventType, d)
	}
	return ""
}

// otherCause renders compensation, child, signal and emitted-event entries.
func otherCause(eventType string, d entryDetails) string {
	switch eventType {
	case "compensation_started":
		s := ""
		if d.Trigger != "" {
			s = "on " + d.Trigger
		}
		if d.Handler != "" {
			s = joinNonEmpty(s, "handler="+shortID(d.Handler))
		}
		return joinNonEmpty(s, kv("handler_invocation", d.HandlerInv))
	case "compensation_completed", "compensation_failed":
		return joinNonEmpty(kv("handler_invocation", d.HandlerInv), kv("handler_status", d.HandlerStat))
	case "child_invoked":
		return joinNonEmpty(kv("child", d.Child), kv("entrypoint", shortID(d.Entrypoint)), kv("status", d.ChildStatus))
	case "signal_received":
		return kv("event", d.EventID)
	case "event_emitted":
		return joinNonEmpty(kv("event", d.EventID), kv("type", shortID(d.EventType)))
	}
	return ""
}

// retryCause renders an automatic retry: when the next attempt runs and after which delay, then
// the error that caused it. A run's retry (status queued) carries available_at and next_attempt;
// a workflow step's retry carries the failed attempt and the delay from the entry's time.
func retryCause(e larkclient.TimelineEntry, d entryDetails) string {
	var delay time.Duration
	if d.DelayMS != nil {
		delay = time.Duration(*d.DelayMS) * time.Millisecond
	}
	at := e.At.Add(delay)
	if d.AvailableAt != nil {
		at = *d.AvailableAt
	}
	next := d.NextAttempt
	if next == 0 && d.Attempt > 0 {
		next = d.Attempt + 1
	}
	s := fmt.Sprintf("retrying at %s after %s", clock(at), delay)
	if next > 0 {
		s += fmt.Sprintf(" (attempt %d)", next)
	}
	if et := errorText(d.Error); et != "" {
		s += ": " + et
	}
	return s
}

// suspendCause renders why a workflow parked and until when.
func suspendCause(d entryDetails) string {
	return joinNonEmpty(untilText(d.Until), reasonText(d.Reason))
}

// httpCause renders an outbound call: method, host, and its status or egress error kind.
func httpCause(d entryDetails) string {
	s := strings.TrimSpace(d.Method + " " + d.Host)
	var kind string
	if json.Unmarshal(d.Error, &kind) == nil && kind != "" {
		return s + " error=" + kind
	}
	if d.Status != 0 {
		return fmt.Sprintf("%s → %d", s, d.Status)
	}
	return s
}

// errorText renders an error object as "type: message (category)"; the type is the last
// segment's name of the GTS error type id (error_type_id, or id inside a step's result).
func errorText(raw json.RawMessage) string {
	var e struct {
		TypeID   string `json:"error_type_id"`
		ID       string `json:"id"`
		Message  string `json:"message"`
		Category string `json:"category"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &e) != nil {
		return ""
	}
	if e.TypeID == "" {
		e.TypeID = e.ID
	}
	return formatError(e.TypeID, e.Message, e.Category)
}

// formatError renders an error as "type: message (category)".
func formatError(typeID, message, category string) string {
	s := strings.ReplaceAll(message, "\n", " ")
	if t := errorTypeName(typeID); t != "" {
		s = t + ": " + s
	}
	if category != "" {
		s += " (" + category + ")"
	}
	return strings.TrimSpace(s)
}

var versionToken = regexp.MustCompile(`^v\d+$`)

// errorTypeName is the name of a GTS error type id's last segment: …err.http_transport.v1~ →
// http_transport.
func errorTypeName(id string) string {
	tokens := strings.Split(shortID(id), ".")
	for i := len(tokens) - 1; i >= 0; i-- {
		if tokens[i] != "" && !versionToken.MatchString(tokens[i]) {
			return tokens[i]
		}
	}
	return ""
}

func untilText(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return "until " + t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func reasonText(r string) string {
	if r == "" {
		return ""
	}
	return "(" + r + ")"
}

func kv(k, v string) string {
	if v == "" {
		return ""
	}
	return k + "=" + v
}

// joinNonEmpty joins the non-empty parts with spaces.
func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// dagDetails renders the details of a DAG run's events that a reader wants on the line: the
// plan's partition and fingerprint, a task's child invocation, gating decision, materialization,
// and why it failed or was skipped.
func dagDetails(raw json.RawMessage) string {
	var d struct {
		PartitionKey string `json:"partition_key"`
		Fingerprint  string `json:"fingerprint"`
		Tasks        int    `json:"tasks"`
		Child        string `json:"child_invocation_id"`
		ChildStatus  string `json:"status"`
		Gating       string `json:"gating_decision"`
		Mat          string `json:"materialization_id"`
		Reason       string `json:"reason"`
		Error        *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return ""
	}
	var b strings.Builder
	for _, kv := range [][2]string{{"partition", d.PartitionKey}, {"child", d.Child}, {"child_status", d.ChildStatus},
		{"gating", d.Gating}, {"materialization", d.Mat}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
		}
	}
	if d.Tasks > 0 {
		fmt.Fprintf(&b, " tasks=%d", d.Tasks)
	}
	if len(d.Fingerprint) >= 12 {
		fmt.Fprintf(&b, " fingerprint=%s…", d.Fingerprint[:12])
	}
	switch {
	case d.Reason != "":
		fmt.Fprintf(&b, " %s", d.Reason)
	case d.Error != nil && d.Error.Message != "":
		fmt.Fprintf(&b, " %s", d.Error.Message)
	}
	return b.String()
}
