package registry

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tenant"
)

const calcID = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.calculate_tax.v1~"

func newService(t *testing.T) *Service {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "r.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	reg, err := schema.New()
	require.NoError(t, err)
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := tenant.New("acme", c.Now())
	p.Enabled = true
	p.Defaults = tenant.Defaults{TimeoutSeconds: 12, MemoryMB: 64, CPU: 0.3}
	require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error { return tx.PutTenant(p) }))
	return NewService(st, reg, c, idgen.UUIDv7{}, nil)
}

var dev = auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleDeveloper}}

func body(t *testing.T, mutate func(map[string]any)) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytesReader([]byte(`{
	  "entrypoint_id": "` + calcID + `", "title": "Calculate Tax",
	  "schema": {"params": {"type": "object"}},
	  "traits": {"invocation": {"supported": ["sync"], "default": "sync"}, "retry": {"max_attempts": 1}},
	  "implementation": {"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
	    "code": {"language": "starlark", "source": "def main(ctx, input):\n  return {}\n"}}}`)))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m))
	if mutate != nil {
		mutate(m)
	}
	return m
}

// TestDefaultsAreStored: the stored definition says what is enforced — tenant defaults for limits,
// 000's schema defaults for the rest — and the version follows the GTS id.
func TestDefaultsAreStored(t *testing.T) {
	s := newService(t)
	e, _, err := s.Register(context.Background(), dev, body(t, nil))
	require.NoError(t, err)
	require.Equal(t, "1.0.0", e.Version)
	require.Equal(t, entrypoint.Owner{OwnerType: entrypoint.OwnerUser, ID: "alice", TenantID: "acme"}, e.Owner)
	var def struct {
		Traits struct {
			Limits       map[string]any `json:"limits"`
			Retry        map[string]any `json:"retry"`
			IsIdempotent bool           `json:"is_idempotent"`
			Entrypoint   bool           `json:"entrypoint"`
		} `json:"traits"`
	}
	require.NoError(t, json.Unmarshal(e.Definition, &def))
	require.Equal(t, map[string]any{"timeout_seconds": 12.0, "memory_mb": 64.0, "cpu": 0.3, "max_concurrent": 100.0}, def.Traits.Limits)
	require.Equal(t, 200.0, def.Traits.Retry["initial_delay_ms"])
	require.True(t, def.Traits.Entrypoint)
	require.False(t, def.Traits.IsIdempotent)
}

func TestVersionMustMatchID(t *testing.T) {
	s := newService(t)
	_, _, err := s.Register(context.Background(), dev, body(t, func(m map[string]any) { m["version"] = "2.0.0" }))
	pe := problem.From(err)
	require.Equal(t, 422, pe.Status)
	require.Equal(t, "$.version", pe.Issues[0].Path)
	require.Equal(t, CodeVersion, pe.Issues[0].Code)
	e, _, err := s.Register(context.Background(), dev, body(t, func(m map[string]any) { m["version"] = "1.0.7" }))
	require.NoError(t, err, "the patch level is free")
	require.Equal(t, "1.0.7", e.Version)
}

// TestRenderCacheFollowsRevisions: a rendered entrypoint is never served after a change.
func TestRenderCacheFollowsRevisions(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	e, _, err := s.Register(ctx, dev, body(t, nil))
	require.NoError(t, err)
	before, err := RenderJSON(e, false)
	require.NoError(t, err)
	again, err := RenderJSON(e, false)
	require.NoError(t, err)
	require.Equal(t, before, again)
	notes := "go"
	act, err := s.ChangeStatus(ctx, dev, e.ID, StatusRequest{Action: entrypoint.ActionActivate, ReleaseNotes: &notes})
	require.NoError(t, err)
	require.Equal(t, e.Revision+1, act.Revision)
	after, err := RenderJSON(act, false)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(after, &m))
	require.Equal(t, "active", m["status"])
	require.Equal(t, "go", m["release_notes"])
	withSrc, err := RenderJSON(act, true)
	require.NoError(t, err)
	require.Contains(t, string(withSrc), "def main")
	require.NotContains(t, string(after), "def main")
}
