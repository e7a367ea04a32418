package pgstore

import (
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The other event reads and writes are in sqlcore; the insert differs: it reports the new
// sequence number or the existing event.

// InsertEvent implements store.Tx.
func (t *tx) InsertEvent(e events.Event) (events.Event, bool, error) {
	doc, err := json.Marshal(e)
	if err != nil {
		return e, false, err
	}
	err = t.t.QueryRowContext(bg, `INSERT INTO events (id, tenant_id, event_type_id, source, subject, received_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, id) DO NOTHING RETURNING seq`,
		e.ID, e.TenantID, e.TypeID, e.Source, e.Subject, ts(e.ReceivedAt), string(doc)).Scan(&e.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		old, err := sqlcore.ScanEvent(t.t.QueryRowContext(bg, "SELECT "+sqlcore.EventCols+" FROM events WHERE tenant_id = ? AND id = ?", e.TenantID, e.ID))
		return old, false, err
	}
	if err != nil {
		return e, false, err
	}
	return e, true, nil
}
