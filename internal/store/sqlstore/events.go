package sqlstore

import (
	"encoding/json"

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
	res, err := t.t.ExecContext(bg, `INSERT INTO events (id, tenant_id, event_type_id, source, subject, received_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, id) DO NOTHING`,
		e.ID, e.TenantID, e.TypeID, e.Source, e.Subject, ts(e.ReceivedAt), string(doc))
	if err != nil {
		return e, false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		old, err := sqlcore.ScanEvent(t.t.QueryRowContext(bg, "SELECT "+sqlcore.EventCols+" FROM events WHERE tenant_id = ? AND id = ?", e.TenantID, e.ID))
		return old, false, err
	}
	e.Seq, err = res.LastInsertId()
	return e, true, err
}
