package eventfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
)

// Matcher evaluates many filters against one event whose payload is raw JSON (a trigger's or a
// waiting workflow's filter against a published event), decoding and normalizing the payload once,
// when the first filter needs it.
type Matcher struct {
	ev       Event
	raw      json.RawMessage
	prepared *Prepared
	bad      bool
}

// NewMatcher returns a Matcher for ev with the payload raw (ev.Payload is ignored).
func NewMatcher(ev Event, raw json.RawMessage) *Matcher {
	return &Matcher{ev: ev, raw: raw}
}

// Matches reports whether the filter expression selects the event: "" matches every event; a
// filter that does not compile, or cannot be evaluated on this event (a missing key, a type
// mismatch, over the cost limit), or a payload that is not JSON, does not match. Compiled filters
// come from the process-wide cache (Cached).
func (m *Matcher) Matches(filter string) bool {
	if filter == "" {
		return true
	}
	f, err := Cached(filter)
	if err != nil {
		return false
	}
	if m.prepared == nil && !m.bad {
		var payload any
		if decodeJSON(m.raw, &payload) != nil {
			m.bad = true
		} else {
			m.ev.Payload = payload
			m.prepared = Prepare(m.ev)
		}
	}
	if m.bad {
		return false
	}
	ok, err := f.MatchPrepared(context.Background(), m.prepared)
	return err == nil && ok
}

// decodeJSON decodes exactly one JSON value, numbers kept as json.Number.
func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

var errTrailing = &Error{Msg: "payload: data after the JSON value"}
