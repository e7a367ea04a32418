package invocation

import (
	"encoding/json"
	"strconv"
	"time"
)

// appendRecord appends r's stored form to b: json.Marshal(r) byte for byte, except that Params and
// Result are copied as they are (EncodeRecord). It writes the members itself, in Record's order
// and with its tags' omitempty and omitzero, because json.Marshal's reflection walk over Record's
// forty members was most of the encoding's cost on every write of a record (TestEncodeRecordIsMarshal
// fills every member, nested ones too, and compares). A string that needs escaping, a time outside
// years 0–9999 and the nested members that are rarely set (the error, metrics, warnings, DAG summary,
// retry policy, cost) are written by json.Marshal.
func appendRecord(b []byte, r *Record) ([]byte, error) {
	w := recordWriter{b: append(b, '{')}
	w.str("invocation_id", r.ID, false)
	w.str("tenant_id", r.TenantID, false)
	w.str("entrypoint_ref", r.EntrypointRef, false)
	w.str("entrypoint_id", r.EntrypointID, false)
	w.str("entrypoint_version", r.EntrypointVersion, true)
	w.str("subject_id", r.SubjectID, false)
	w.str("entrypoint_owner", r.EntrypointOwner, true)
	w.str("status", string(r.Status), false)
	w.str("mode", string(r.Mode), false)
	w.name("params")
	if len(r.Params) == 0 {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, r.Params...)
	}
	if len(r.Result) > 0 {
		w.name("result")
		w.b = append(w.b, r.Result...)
	}
	if r.Error != nil {
		w.marshal("error", r.Error)
	}
	w.str("correlation_id", r.CorrelationID, false)
	w.str("trace_id", r.TraceID, true)
	w.str("span_id", r.SpanID, true)
	if r.Metrics != (Metrics{}) {
		w.marshal("metrics", r.Metrics)
	}
	w.int("attempt", int64(r.Attempt), false)
	w.int("engine_attempt", int64(r.EngineAttempt), true)
	w.str("parent_id", r.ParentID, true)
	w.int("depth", int64(r.Depth), true)
	if r.ParentSeq != nil {
		w.int("parent_seq", int64(*r.ParentSeq), false)
	}
	w.str("compensation_for", r.CompensationFor, true)
	w.int("retry_base", int64(r.RetryBase), true)
	w.str("via", r.Via, true)
	w.str("origin", r.Origin, true)
	w.str("cache_key", r.CacheKey, true)
	if len(r.RetryPolicy) > 0 {
		w.marshal("retry_policy", r.RetryPolicy)
	}
	w.str("replay_of", r.Replay, true)
	if len(r.Warnings) > 0 {
		w.marshal("warnings", r.Warnings)
	}
	w.time("created_at", r.CreatedAt)
	w.timePtr("started_at", r.StartedAt)
	w.timePtr("suspended_at", r.SuspendedAt)
	w.timePtr("finished_at", r.FinishedAt)
	if !r.UpdatedAt.IsZero() {
		w.time("updated_at", r.UpdatedAt)
	}
	w.int("last_seq", r.LastSeq, true)
	w.int("journal_from", r.JournalFrom, true)
	w.int("generation", int64(r.Generation), true)
	if r.Cost != 0 {
		w.marshal("cost", r.Cost)
	}
	w.str("wake", r.Wake, true)
	w.str("dag_task", r.DAGTask, true)
	if r.DAG != nil {
		w.marshal("dag", r.DAG)
	}
	w.str("node", r.Node, true)
	if w.err != nil {
		return nil, w.err
	}
	return append(w.b, '}'), nil
}

// recordWriter appends a JSON object's members; the first error stops it.
type recordWriter struct {
	b    []byte
	more bool // a member was written: the next one needs a comma
	err  error
}

// name writes a member's name (its names are plain ASCII and need no escaping) and its colon.
func (w *recordWriter) name(n string) {
	if w.more {
		w.b = append(w.b, ',')
	}
	w.more = true
	w.b = append(w.b, '"')
	w.b = append(w.b, n...)
	w.b = append(w.b, '"', ':')
}

// str writes a string member (none when omitEmpty and s is empty).
func (w *recordWriter) str(n, s string, omitEmpty bool) {
	if omitEmpty && s == "" {
		return
	}
	if !plainString(s) {
		w.marshal(n, s)
		return
	}
	w.name(n)
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

// int writes an integer member (none when omitEmpty and v is 0).
func (w *recordWriter) int(n string, v int64, omitEmpty bool) {
	if omitEmpty && v == 0 {
		return
	}
	w.name(n)
	w.b = strconv.AppendInt(w.b, v, 10)
}

// time writes t as json.Marshal does (RFC 3339 with nanoseconds), or through it when its year is
// one json.Marshal refuses.
func (w *recordWriter) time(n string, t time.Time) {
	if y := t.Year(); y < 0 || y > 9999 {
		w.marshal(n, t)
		return
	}
	w.name(n)
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
}

func (w *recordWriter) timePtr(n string, t *time.Time) {
	if t != nil {
		w.time(n, *t)
	}
}

// marshal writes a member with json.Marshal.
func (w *recordWriter) marshal(n string, v any) {
	if w.err != nil {
		return
	}
	doc, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	w.name(n)
	w.b = append(w.b, doc...)
}

// plainString reports whether json.Marshal writes s as it is between quotes: printable ASCII
// without the quote, the backslash and the three characters it escapes for HTML.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
