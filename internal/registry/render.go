package registry

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/entrypoint"
)

// TimeFormat is how the API writes timestamps: RFC 3339 in UTC with the precision they are stored
// with (microseconds, trailing zeros dropped), the same as encoding/json writes time.Time, so a
// value copied from a response matches exactly in a $filter.
const TimeFormat = time.RFC3339Nano

func fmtTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

func fmtTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return fmtTime(*t)
}

// Render is an entrypoint as the API shows it: 000's entrypoint object plus id (opaque),
// entrypoint_id (GTS), kind and lifecycle details. The Starlark source is left out unless
// includeSource is set (001's include_source).
func Render(e entrypoint.Entrypoint, includeSource bool) map[string]any {
	var m map[string]any
	dec := json.NewDecoder(bytesReader(e.Definition))
	dec.UseNumber()
	_ = dec.Decode(&m)
	if m == nil {
		m = map[string]any{}
	}
	if !includeSource {
		if impl, ok := m["implementation"].(map[string]any); ok {
			if code, ok := impl["code"].(map[string]any); ok {
				delete(code, "source")
			}
		}
	}
	m["id"] = e.ID
	m["entrypoint_id"] = e.GTSID
	m["kind"] = e.Kind
	m["version"] = e.Version
	m["tenant_id"] = e.TenantID
	m["owner"] = e.Owner
	m["shared"] = e.Shared
	m["status"] = e.Status
	m["title"] = e.Title
	m["tags"] = e.Tags
	m["created_at"] = fmtTime(e.CreatedAt)
	m["updated_at"] = fmtTime(e.UpdatedAt)
	m["activated_at"] = fmtTimePtr(e.ActivatedAt)
	m["disabled_at"] = fmtTimePtr(e.DisabledAt)
	m["archived_at"] = fmtTimePtr(e.ArchivedAt)
	if e.ReleaseNotes != "" {
		m["release_notes"] = e.ReleaseNotes
	}
	if d := e.Deprecation; d != nil {
		dep := map[string]any{"deprecated_at": fmtTime(d.DeprecatedAt)}
		if d.Reason != "" {
			dep["reason"] = d.Reason
		}
		if d.SuccessorID != "" {
			dep["successor_id"] = d.SuccessorID
		}
		if d.SunsetDate != nil {
			dep["sunset_date"] = fmtTime(*d.SunsetDate)
		}
		m["deprecation"] = dep
	}
	return m
}

// VersionSummary is one row of GET /entrypoints/{id}/versions.
type VersionSummary struct {
	ID           string            `json:"id"`
	EntrypointID string            `json:"entrypoint_id"`
	Version      string            `json:"version"`
	Status       entrypoint.Status `json:"status"`
	CreatedAt    string            `json:"created_at"`
	ActivatedAt  any               `json:"activated_at"`
	DeprecatedAt any               `json:"deprecated_at"`
}

// Summaries renders a version list.
func Summaries(list []entrypoint.Entrypoint) []VersionSummary {
	out := make([]VersionSummary, 0, len(list))
	for _, e := range list {
		v := VersionSummary{ID: e.ID, EntrypointID: e.GTSID, Version: e.Version, Status: e.Status,
			CreatedAt: fmtTime(e.CreatedAt), ActivatedAt: fmtTimePtr(e.ActivatedAt)}
		if e.Deprecation != nil {
			v.DeprecatedAt = fmtTime(e.Deprecation.DeprecatedAt)
		}
		out = append(out, v)
	}
	return out
}

// renderCache holds encoded entrypoints by (id, revision, include_source). Every change to an
// entrypoint bumps its revision, so an entry can never be stale; the bound only limits memory.
type renderCache struct {
	mu sync.RWMutex
	m  map[renderKey]json.RawMessage
}

type renderKey struct {
	id     string
	rev    int64
	source bool
}

const renderCacheMax = 4096

var rendered = &renderCache{m: map[renderKey]json.RawMessage{}}

// RenderJSON is Render encoded as JSON, cached: reads of unchanged entrypoints skip decoding and
// re-encoding the stored definition.
func RenderJSON(e entrypoint.Entrypoint, includeSource bool) (json.RawMessage, error) {
	k := renderKey{e.ID, e.Revision, includeSource}
	rendered.mu.RLock()
	b, ok := rendered.m[k]
	rendered.mu.RUnlock()
	if ok {
		return b, nil
	}
	b, err := json.Marshal(Render(e, includeSource))
	if err != nil {
		return nil, err
	}
	rendered.mu.Lock()
	if len(rendered.m) >= renderCacheMax {
		clear(rendered.m)
	}
	rendered.m[k] = b
	rendered.mu.Unlock()
	return b, nil
}
