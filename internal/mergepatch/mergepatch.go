// Package mergepatch applies JSON merge patches (RFC 7396) to decoded JSON documents (the PATCH of
// tenant policies, schedules and triggers) and tells which members an update changed.
package mergepatch

import (
	"encoding/json"
	"slices"
)

// Apply returns target patched by patch, both decoded JSON (maps, slices, scalars): a patch member
// that is null removes the target's member, an object member is merged recursively, anything else
// replaces it; a patch that is not an object replaces the whole target. target's maps may be
// modified.
func Apply(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = Apply(tm[k], v)
	}
	return tm
}

// Changed returns, sorted, the names of the top-level JSON members that differ between the
// encodings of a and b (set in only one of them, or set to different values): the updated_fields
// of an update's audit event.
func Changed(a, b any) ([]string, error) {
	var ma, mb map[string]json.RawMessage
	for _, x := range []struct {
		v    any
		into *map[string]json.RawMessage
	}{{a, &ma}, {b, &mb}} {
		j, err := json.Marshal(x.v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(j, x.into); err != nil {
			return nil, err
		}
	}
	var out []string
	for k, v := range mb {
		if string(ma[k]) != string(v) {
			out = append(out, k)
		}
	}
	for k := range ma {
		if _, ok := mb[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}
