package pgstore

import (
	"time"

	"github.com/larkrun/lark/internal/webhook"
)

// The webhook triggers' reads and writes are in sqlcore; the secret's upsert differs.

// PutWebhookSecret implements store.Tx.
func (t *tx) PutWebhookSecret(s webhook.Secret, keepFrom int, previousExpiresAt *time.Time) error {
	if _, err := t.t.ExecContext(bg, `INSERT INTO webhook_secrets (tenant_id, trigger_id, generation, sealed, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, trigger_id, generation) DO UPDATE SET sealed = excluded.sealed,
		created_at = excluded.created_at, expires_at = excluded.expires_at`, s.TenantID, s.TriggerID, s.Generation, s.Sealed, ts(s.CreatedAt), tsPtr(s.ExpiresAt)); err != nil {
		return err
	}
	if _, err := t.t.ExecContext(bg, "DELETE FROM webhook_secrets WHERE tenant_id = ? AND trigger_id = ? AND generation < ?",
		s.TenantID, s.TriggerID, keepFrom); err != nil {
		return err
	}
	_, err := t.t.ExecContext(bg, "UPDATE webhook_secrets SET expires_at = ? WHERE tenant_id = ? AND trigger_id = ? AND generation < ?",
		tsPtr(previousExpiresAt), s.TenantID, s.TriggerID, s.Generation)
	return err
}
