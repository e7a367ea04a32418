package store

import (
	"context"
	"time"

	"github.com/larkrun/lark/internal/webhook"
)

// WebhookReader holds the reads of webhook triggers, their secrets and deliveries.
type WebhookReader interface {
	// WebhookTrigger reads one webhook trigger of a tenant.
	WebhookTrigger(ctx context.Context, tenantID, id string) (webhook.Trigger, error)
	// ListWebhookTriggers lists a tenant's webhook triggers. Filters: webhook_trigger_id,
	// entrypoint_id, name, status, created_at; order: any of them (default created_at).
	ListWebhookTriggers(ctx context.Context, tenantID string, q ListQuery) (Page[webhook.Trigger], error)
	// CountTenantWebhookTriggers counts a tenant's webhook triggers (the max_triggers quota).
	CountTenantWebhookTriggers(ctx context.Context, tenantID string) (int64, error)
	// WebhookSecrets reads the sealed secrets of a trigger, newest generation first.
	WebhookSecrets(ctx context.Context, tenantID, triggerID string) ([]webhook.Secret, error)
	// WebhookSecretsAfter lists up to limit sealed secrets of every tenant after the key (tenant,
	// trigger, generation) in that order: the walk of a master-key rotation.
	WebhookSecretsAfter(ctx context.Context, after WebhookSecretKey, limit int) ([]webhook.Secret, error)
	// WebhookDeliveries lists a trigger's recorded deliveries, newest first by default. Filters:
	// status_code, outcome, received_at; order: any of them.
	WebhookDeliveries(ctx context.Context, tenantID, triggerID string, q ListQuery) (Page[webhook.Delivery], error)
	// WebhookSeenAt reads a remembered entry (WebhookTx.RememberWebhook) that has not expired at
	// now; ErrNotFound otherwise.
	WebhookSeenAt(ctx context.Context, tenantID, triggerID, kind, key string, now time.Time) (webhook.Seen, error)
}

// WebhookSecretKey names one sealed secret (WebhookReader.WebhookSecretsAfter).
type WebhookSecretKey struct {
	TenantID   string
	TriggerID  string
	Generation int
}

// WebhookTx holds the writes of webhook triggers, their secrets, deliveries and replay memory.
type WebhookTx interface {
	// InsertWebhookTrigger stores a new trigger with Revision 1; ErrConflict when the tenant has
	// one with the same id.
	InsertWebhookTrigger(w *webhook.Trigger) error
	// WebhookTrigger is Reader.WebhookTrigger inside the transaction.
	WebhookTrigger(tenantID, id string) (webhook.Trigger, error)
	// UpdateWebhookTrigger replaces the trigger whose Revision equals w.Revision and bumps it;
	// ErrStale when it changed since, ErrNotFound when it is gone.
	UpdateWebhookTrigger(w *webhook.Trigger) error
	// DeleteWebhookTrigger deletes a trigger with its secrets, deliveries and replay memory.
	DeleteWebhookTrigger(tenantID, id string) error
	// CountTenantWebhookTriggers is Reader.CountTenantWebhookTriggers inside the transaction.
	CountTenantWebhookTriggers(tenantID string) (int64, error)
	// PutWebhookSecret stores a secret generation (replacing one of the same generation), deletes
	// the trigger's generations older than keepFrom and sets the expiry of the older ones kept to
	// previousExpiresAt.
	PutWebhookSecret(s webhook.Secret, keepFrom int, previousExpiresAt *time.Time) error
	// RewrapWebhookSecret replaces the sealed value of a secret that still holds old; ErrStale
	// when it changed meanwhile, ErrNotFound when it is gone.
	RewrapWebhookSecret(s webhook.Secret, old []byte) error
	// RecordWebhookDelivery stores a delivery and deletes the trigger's deliveries beyond the
	// newest keep.
	RecordWebhookDelivery(d webhook.Delivery, keep int) error
	// RememberWebhook records a Seen entry; ErrConflict when the same (tenant, trigger, kind, key)
	// is remembered and not expired at now. Expired entries of the trigger are deleted on the way.
	RememberWebhook(s webhook.Seen, now time.Time) error
	// WebhookSeen reads a remembered entry that has not expired at now; ErrNotFound otherwise.
	WebhookSeen(tenantID, triggerID, kind, key string, now time.Time) (webhook.Seen, error)
}
