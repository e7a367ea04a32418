// Package mergepatch applies JSON merge patches (RFC 7396) to decoded JSON documents: the PATCH of
// tenant policies and of schedules.
package mergepatch

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
