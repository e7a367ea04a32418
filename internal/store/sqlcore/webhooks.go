package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/webhook"
)

// A webhook trigger row keeps the resource as JSON (doc) plus the columns it is found by; revision
// lives in its column only.
const webhookCols = "revision, doc"

func scanWebhook(sc Scanner) (webhook.Trigger, error) {
	var w webhook.Trigger
	var rev int64
	var doc string
	if err := sc.Scan(&rev, &doc); err != nil {
		return w, err
	}
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return w, fmt.Errorf("webhook trigger: %w", err)
	}
	w.Revision = rev
	return w, nil
}

// InsertWebhookTrigger implements store.Tx.
func (t *Tx) InsertWebhookTrigger(w *webhook.Trigger) error {
	w.Revision = 1
	doc, err := json.Marshal(w)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO webhook_triggers (tenant_id, id, entrypoint_id, name, status, revision,
		created_at, updated_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.TenantID, w.ID, w.EntrypointID, w.Name, string(w.Status), w.Revision, TS(w.CreatedAt), TS(w.UpdatedAt), string(doc))
	if dup {
		return fmt.Errorf("webhook trigger %s: %w", w.ID, store.ErrConflict)
	}
	return err
}

// WebhookTrigger implements store.Tx.
func (t *Tx) WebhookTrigger(tenantID, id string) (webhook.Trigger, error) {
	w, err := scanWebhook(t.Q.QueryRowContext(bg, "SELECT "+webhookCols+" FROM webhook_triggers WHERE tenant_id = ? AND id = ?", tenantID, id))
	return w, NotFound(err, "webhook trigger")
}

// UpdateWebhookTrigger implements store.Tx.
func (t *Tx) UpdateWebhookTrigger(w *webhook.Trigger) error {
	doc, err := json.Marshal(w)
	if err != nil {
		return err
	}
	res, err := t.Q.ExecContext(bg, `UPDATE webhook_triggers SET entrypoint_id = ?, name = ?, status = ?, revision = revision + 1,
		updated_at = ?, doc = ? WHERE tenant_id = ? AND id = ? AND revision = ?`,
		w.EntrypointID, w.Name, string(w.Status), TS(w.UpdatedAt), string(doc), w.TenantID, w.ID, w.Revision)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		var one int
		if err := t.Q.QueryRowContext(bg, "SELECT 1 FROM webhook_triggers WHERE tenant_id = ? AND id = ?", w.TenantID, w.ID).Scan(&one); err != nil {
			return NotFound(err, "webhook trigger")
		}
		return fmt.Errorf("webhook trigger %s: %w", w.ID, store.ErrStale)
	}
	w.Revision++
	return nil
}

// DeleteWebhookTrigger implements store.Tx.
func (t *Tx) DeleteWebhookTrigger(tenantID, id string) error {
	res, err := t.Q.ExecContext(bg, "DELETE FROM webhook_triggers WHERE tenant_id = ? AND id = ?", tenantID, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("webhook trigger %s: %w", id, store.ErrNotFound)
	}
	for _, table := range []string{"webhook_secrets", "webhook_deliveries", "webhook_seen"} {
		if _, err := t.Q.ExecContext(bg, "DELETE FROM "+table+" WHERE tenant_id = ? AND trigger_id = ?", tenantID, id); err != nil {
			return err
		}
	}
	return nil
}

// CountTenantWebhookTriggers implements store.Tx.
func (t *Tx) CountTenantWebhookTriggers(tenantID string) (int64, error) {
	var n int64
	err := t.Q.QueryRowContext(bg, "SELECT count(*) FROM webhook_triggers WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// CountTenantWebhookTriggers implements store.Reader.
func (s *Reader) CountTenantWebhookTriggers(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.Q.QueryRowContext(ctx, "SELECT count(*) FROM webhook_triggers WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// WebhookTrigger implements store.Reader.
func (s *Reader) WebhookTrigger(ctx context.Context, tenantID, id string) (webhook.Trigger, error) {
	w, err := scanWebhook(s.Q.QueryRowContext(ctx, "SELECT "+webhookCols+" FROM webhook_triggers WHERE tenant_id = ? AND id = ?", tenantID, id))
	return w, NotFound(err, "webhook trigger")
}

var webhookFields = odata.Schema{
	"webhook_trigger_id": {Column: "id", Type: odata.String, Filter: true, Sort: true},
	"entrypoint_id":      {Column: "entrypoint_id", Type: odata.String, Filter: true, Sort: true},
	"name":               {Column: "name", Type: odata.String, Filter: true, Sort: true},
	"status":             {Column: "status", Type: odata.String, Filter: true, Sort: true},
	"created_at":         {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListWebhookTriggers implements store.Reader.
func (s *Reader) ListWebhookTriggers(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[webhook.Trigger], error) {
	return ListPage(ctx, s.Q, ListSpec[webhook.Trigger]{
		From: "webhook_triggers", Cols: webhookCols, Fields: webhookFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scan:         scanWebhook,
	}, q)
}

const webhookSecretCols = "tenant_id, trigger_id, generation, sealed, created_at, expires_at"

func scanWebhookSecret(sc Scanner) (webhook.Secret, error) {
	var s webhook.Secret
	var created string
	var exp sql.NullString
	if err := sc.Scan(&s.TenantID, &s.TriggerID, &s.Generation, &s.Sealed, &created, &exp); err != nil {
		return s, err
	}
	var err error
	if s.CreatedAt, err = ParseTS(created); err != nil {
		return s, err
	}
	s.ExpiresAt, err = ParseTSPtr(exp)
	return s, err
}

// WebhookSecrets implements store.Reader.
func (s *Reader) WebhookSecrets(ctx context.Context, tenantID, triggerID string) ([]webhook.Secret, error) {
	rows, err := s.Q.QueryContext(ctx, "SELECT "+webhookSecretCols+` FROM webhook_secrets WHERE tenant_id = ? AND trigger_id = ?
		ORDER BY generation DESC`, tenantID, triggerID)
	return ScanAll(rows, err, func(r *sql.Rows) (webhook.Secret, error) { return scanWebhookSecret(r) })
}

// WebhookSecretsAfter implements store.Reader.
func (s *Reader) WebhookSecretsAfter(ctx context.Context, after store.WebhookSecretKey, limit int) ([]webhook.Secret, error) {
	rows, err := s.Q.QueryContext(ctx, "SELECT "+webhookSecretCols+` FROM webhook_secrets
		WHERE (tenant_id, trigger_id, generation) > (?, ?, ?) ORDER BY tenant_id, trigger_id, generation LIMIT ?`,
		after.TenantID, after.TriggerID, after.Generation, limit)
	return ScanAll(rows, err, func(r *sql.Rows) (webhook.Secret, error) { return scanWebhookSecret(r) })
}

// RewrapWebhookSecret implements store.Tx.
func (t *Tx) RewrapWebhookSecret(s webhook.Secret, old []byte) error {
	res, err := t.Q.ExecContext(bg, `UPDATE webhook_secrets SET sealed = ? WHERE tenant_id = ? AND trigger_id = ? AND generation = ? AND sealed = ?`,
		s.Sealed, s.TenantID, s.TriggerID, s.Generation, old)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		var one int
		if err := t.Q.QueryRowContext(bg, "SELECT 1 FROM webhook_secrets WHERE tenant_id = ? AND trigger_id = ? AND generation = ?",
			s.TenantID, s.TriggerID, s.Generation).Scan(&one); err != nil {
			return NotFound(err, "webhook secret")
		}
		return fmt.Errorf("webhook secret: %w", store.ErrStale)
	}
	return nil
}

// RecordWebhookDelivery implements store.Tx.
func (t *Tx) RecordWebhookDelivery(d webhook.Delivery, keep int) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if _, err := t.Q.ExecContext(bg, `INSERT INTO webhook_deliveries (tenant_id, trigger_id, id, received_at, status_code, outcome, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, d.TenantID, d.TriggerID, d.ID, TS(d.ReceivedAt), d.StatusCode, d.Outcome, string(doc)); err != nil {
		return err
	}
	// Keep the newest `keep`: the oldest beyond them go (the index makes this a short walk).
	_, err = t.Q.ExecContext(bg, `DELETE FROM webhook_deliveries WHERE tenant_id = ? AND trigger_id = ? AND id IN (
		SELECT id FROM webhook_deliveries WHERE tenant_id = ? AND trigger_id = ? ORDER BY received_at DESC, id DESC `+t.D.Offset()+`)`,
		d.TenantID, d.TriggerID, d.TenantID, d.TriggerID, keep)
	return err
}

var deliveryFields = odata.Schema{
	"delivery_id": {Column: "id", Type: odata.String, Filter: true, Sort: true},
	"status_code": {Column: "status_code", Type: odata.Int, Filter: true, Sort: true},
	"outcome":     {Column: "outcome", Type: odata.String, Filter: true, Sort: true},
	"received_at": {Column: "received_at", Type: odata.Time, Filter: true, Sort: true},
}

// WebhookDeliveries implements store.Reader.
func (s *Reader) WebhookDeliveries(ctx context.Context, tenantID, triggerID string, q store.ListQuery) (store.Page[webhook.Delivery], error) {
	return ListPage(ctx, s.Q, ListSpec[webhook.Delivery]{
		From: "webhook_deliveries", Cols: "doc", Fields: deliveryFields,
		Scope: "tenant_id = ? AND trigger_id = ?", ScopeArgs: []any{tenantID, triggerID},
		DefaultOrder: []odata.OrderItem{{Field: "received_at", Desc: true}, {Field: "delivery_id", Desc: true}},
		Scan: func(r Scanner) (webhook.Delivery, error) {
			var d webhook.Delivery
			var doc string
			if err := r.Scan(&doc); err != nil {
				return d, err
			}
			return d, json.Unmarshal([]byte(doc), &d)
		},
	}, q)
}

// RememberWebhook implements store.Tx.
func (t *Tx) RememberWebhook(s webhook.Seen, now time.Time) error {
	if _, err := t.Q.ExecContext(bg, "DELETE FROM webhook_seen WHERE tenant_id = ? AND trigger_id = ? AND expires_at <= ?",
		s.TenantID, s.TriggerID, TS(now)); err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO webhook_seen (tenant_id, trigger_id, kind, key, invocation_id, delivery_id, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, s.TenantID, s.TriggerID, s.Kind, s.Key, s.InvocationID, s.DeliveryID,
		TS(s.ExpiresAt))
	if dup {
		return fmt.Errorf("webhook %s already seen: %w", s.Kind, store.ErrConflict)
	}
	return err
}

// WebhookSeen implements store.Tx.
func (t *Tx) WebhookSeen(tenantID, triggerID, kind, key string, now time.Time) (webhook.Seen, error) {
	return seen(bg, t.Q.QueryRowContext, webhookSeenKey{tenantID, triggerID, kind, key}, now)
}

// WebhookSeenAt implements store.Reader.
func (s *Reader) WebhookSeenAt(ctx context.Context, tenantID, triggerID, kind, key string, now time.Time) (webhook.Seen, error) {
	return seen(ctx, s.Q.QueryRowContext, webhookSeenKey{tenantID, triggerID, kind, key}, now)
}

// webhookSeenKey names a remembered entry.
type webhookSeenKey struct{ tenantID, triggerID, kind, key string }

// seen reads a remembered entry through query (the transaction's or the read pool's).
func seen(ctx context.Context, query func(context.Context, string, ...any) *sql.Row, k webhookSeenKey, now time.Time) (webhook.Seen, error) {
	tenantID, triggerID, kind, key := k.tenantID, k.triggerID, k.kind, k.key
	s := webhook.Seen{TenantID: tenantID, TriggerID: triggerID, Kind: kind, Key: key}
	var exp string
	err := query(ctx, `SELECT invocation_id, delivery_id, expires_at FROM webhook_seen
		WHERE tenant_id = ? AND trigger_id = ? AND kind = ? AND key = ? AND expires_at > ?`,
		tenantID, triggerID, kind, key, TS(now)).Scan(&s.InvocationID, &s.DeliveryID, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("webhook %s: %w", kind, store.ErrNotFound)
	}
	if err != nil {
		return s, err
	}
	s.ExpiresAt, err = ParseTS(exp)
	return s, err
}
