package invocation

import (
	"bytes"
	"encoding/json"
	"errors"
)

// EncodeRecord is json.Marshal(r), the record's stored form, without re-encoding Params and
// Result: json.Marshal re-scans and compacts every json.RawMessage it writes, which for a record
// carrying a 900 KB params and a 1.8 MB result was most of the store writer's time (a third of
// what the writer did in a noisy-neighbour measurement). Params and Result are JSON the engine
// checked when it took them in (the API's body checks, the sandbox's encoder, the stored log); they
// are copied as they are. The other members are written by appendRecord.
func EncodeRecord(r Record) ([]byte, error) {
	return appendRecord(make([]byte, 0, 512+len(r.Params)+len(r.Result)), &r)
}

// EncodeOutcome is json.Marshal(o), a terminal event's Data, without re-encoding the result (see
// EncodeRecord): the result is JSON checked where it came in (the sandbox's encoder, the worker
// protocol's decoder), so it is copied as it is, after a check of its shape (its first and last
// bytes) that costs nothing: a full json.Valid here was a quarter of the CPU of a call returning
// 1.8 MB. A result whose shape is not JSON's is an error, as with json.Marshal.
func EncodeOutcome(o Outcome) ([]byte, error) {
	result := o.Result
	o.Result = nil
	rest, err := json.Marshal(o)
	if err != nil || len(result) == 0 {
		return rest, err
	}
	if !jsonShaped(result) {
		return nil, errors.New("encode outcome: the result is not JSON")
	}
	out := make([]byte, 0, len(rest)+len(result)+len(`{"result":,`))
	out = append(out, `{"result":`...)
	out = append(out, result...)
	if len(rest) > 2 { // more members than {}
		out = append(out, ',')
	}
	return append(out, rest[1:]...), nil
}

// jsonShaped reports whether b, trimmed, looks like one JSON value by its first and last bytes: an
// object, array or string that closes as it opens, or a short literal (true, 1.5, null) made of
// the bytes literals are made of. It is a guard against a truncated or empty result, not a parser.
func jsonShaped(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return false
	}
	first, last := b[0], b[len(b)-1]
	switch first {
	case '{':
		return last == '}' && len(b) >= 2
	case '[':
		return last == ']' && len(b) >= 2
	case '"':
		return last == '"' && len(b) >= 2
	}
	return len(b) <= 64 && json.Valid(b)
}
