package sqlcore

import (
	"encoding/json"

	"github.com/larkrun/lark/internal/invocation"
)

// DecodeRecord is the projection stored as the record JSON and its hot columns: last_seq and
// updated_at are the columns' (the stores' advanceRecord moves only those), the rest is the JSON's.
func DecodeRecord(doc string, last int64, updated string) (invocation.Record, error) {
	var r invocation.Record
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return r, err
	}
	at, err := ParseTS(updated)
	if err != nil {
		return r, err
	}
	r.LastSeq, r.UpdatedAt = last, at
	return r, nil
}
