// Package audit defines the audit events recorded for every change (001, 002), in 000's naming.
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// TypeBase is the root GTS type of audit events.
const TypeBase = "gts.x.core.serverless.audit.v1~"

// Audit event types (001's registry events mapped onto 000's family).
const (
	EntrypointCreated    = TypeBase + "x.core.serverless.audit.entrypoint_created.v1~"
	EntrypointUpdated    = TypeBase + "x.core.serverless.audit.entrypoint_updated.v1~"
	EntrypointActivated  = TypeBase + "x.core.serverless.audit.entrypoint_activated.v1~"
	EntrypointDeprecated = TypeBase + "x.core.serverless.audit.entrypoint_deprecated.v1~"
	EntrypointDisabled   = TypeBase + "x.core.serverless.audit.entrypoint_disabled.v1~"
	EntrypointEnabled    = TypeBase + "x.core.serverless.audit.entrypoint_enabled.v1~"
	EntrypointArchived   = TypeBase + "x.core.serverless.audit.entrypoint_archived.v1~"
	EntrypointDeleted    = TypeBase + "x.core.serverless.audit.entrypoint_deleted.v1~"
	TenantEnabled        = TypeBase + "x.core.serverless.audit.tenant_enabled.v1~"
	TenantDisabled       = TypeBase + "x.core.serverless.audit.tenant_disabled.v1~"
	TenantPolicyUpdated  = TypeBase + "x.core.serverless.audit.tenant_policy_updated.v1~"
	TokenCreated         = TypeBase + "x.core.serverless.audit.token_created.v1~"
	TokenRevoked         = TypeBase + "x.core.serverless.audit.token_revoked.v1~"
	// Identity providers (OIDC issuers whose JWTs authenticate callers).
	IdentityProviderCreated = TypeBase + "x.core.serverless.audit.identity_provider_created.v1~"
	IdentityProviderDeleted = TypeBase + "x.core.serverless.audit.identity_provider_deleted.v1~"
	// Schedules (002's trigger audit events mapped onto 000's family).
	ScheduleCreated   = TypeBase + "x.core.serverless.audit.schedule_created.v1~"
	ScheduleUpdated   = TypeBase + "x.core.serverless.audit.schedule_updated.v1~"
	SchedulePaused    = TypeBase + "x.core.serverless.audit.schedule_paused.v1~"
	ScheduleResumed   = TypeBase + "x.core.serverless.audit.schedule_resumed.v1~"
	ScheduleDeleted   = TypeBase + "x.core.serverless.audit.schedule_deleted.v1~"
	ScheduleTriggered = TypeBase + "x.core.serverless.audit.schedule_triggered.v1~"
	// Backfills (004 §7).
	BackfillCreated  = TypeBase + "x.core.serverless.audit.backfill_created.v1~"
	BackfillPaused   = TypeBase + "x.core.serverless.audit.backfill_paused.v1~"
	BackfillResumed  = TypeBase + "x.core.serverless.audit.backfill_resumed.v1~"
	BackfillCanceled = TypeBase + "x.core.serverless.audit.backfill_canceled.v1~"
	BackfillRetried  = TypeBase + "x.core.serverless.audit.backfill_retried.v1~"
	// Webhook triggers (002's webhook_created, webhook_deleted, webhook_secret_regenerated, plus
	// the changes 002 does not name).
	WebhookCreated           = TypeBase + "x.core.serverless.audit.webhook_created.v1~"
	WebhookUpdated           = TypeBase + "x.core.serverless.audit.webhook_updated.v1~"
	WebhookEnabled           = TypeBase + "x.core.serverless.audit.webhook_enabled.v1~"
	WebhookDisabled          = TypeBase + "x.core.serverless.audit.webhook_disabled.v1~"
	WebhookDeleted           = TypeBase + "x.core.serverless.audit.webhook_deleted.v1~"
	WebhookSecretRegenerated = TypeBase + "x.core.serverless.audit.webhook_secret_regenerated.v1~"
)

// Event types and event triggers (002's trigger audit events mapped onto 000's family).
const (
	EventTypeCreated          = TypeBase + "x.core.serverless.audit.event_type_created.v1~"
	EventTypeDeleted          = TypeBase + "x.core.serverless.audit.event_type_deleted.v1~"
	TriggerCreated            = TypeBase + "x.core.serverless.audit.event_trigger_created.v1~"
	TriggerUpdated            = TypeBase + "x.core.serverless.audit.event_trigger_updated.v1~"
	TriggerEnabled            = TypeBase + "x.core.serverless.audit.event_trigger_enabled.v1~"
	TriggerDisabled           = TypeBase + "x.core.serverless.audit.event_trigger_disabled.v1~"
	TriggerDeleted            = TypeBase + "x.core.serverless.audit.event_trigger_deleted.v1~"
	TriggerDeadLettersRedrive = TypeBase + "x.core.serverless.audit.event_trigger_dead_letters_redriven.v1~"
	TriggerDeadLettersPurged  = TypeBase + "x.core.serverless.audit.event_trigger_dead_letters_purged.v1~"
)

// Event is one audit record. Details never contain secrets.
type Event struct {
	ID            string          `json:"id"`
	TenantID      string          `json:"tenant_id"`
	Type          string          `json:"type"`
	ActorID       string          `json:"actor_id"`
	ResourceType  string          `json:"resource_type"`
	ResourceID    string          `json:"resource_id"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	At            time.Time       `json:"timestamp"`
	Details       json.RawMessage `json:"details,omitempty"`
}

// ErrInvalidDetails is returned by Validate for details that are not one valid JSON value.
var ErrInvalidDetails = errors.New("audit: details are not valid JSON")

// Validate reports whether e can be stored: its details, when present, are exactly one valid JSON
// value. The audit log is append-only, so a store refuses an event that fails it rather than keep
// a row it could not render.
func (e Event) Validate() error {
	if len(e.Details) > 0 && !json.Valid(e.Details) {
		return ErrInvalidDetails
	}
	return nil
}

// Renderable returns e ready to be encoded: details that are not valid JSON (a row written before
// Validate existed) become a JSON string holding the raw text, and ok reports whether they were.
func (e Event) Renderable() (out Event, ok bool) {
	if e.Validate() == nil {
		return e, true
	}
	raw, err := json.Marshal(string(e.Details))
	if err != nil {
		raw = json.RawMessage(`null`)
	}
	e.Details = raw
	return e, false
}

// WithDetails returns ev with details encoded as its Details. A value that does not encode is an
// error, which fails the write that records the event rather than dropping its details.
func WithDetails(ev Event, details map[string]any) (Event, error) {
	raw, err := json.Marshal(details)
	if err != nil {
		return ev, fmt.Errorf("audit %s details: %w", ev.Type, err)
	}
	ev.Details = raw
	return ev, nil
}
