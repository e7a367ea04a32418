package e2e

// Helpers of the hostile-tenant tests: tenants, tokens and functions set up through the API as a
// platform operator and a tenant admin would.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	fnPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~"
	wfPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// tenant enables tenantID, with egress to any public host.
func (p *larkProc) tenant(t testing.TB, tenantID string) {
	t.Helper()
	policy := map[string]any{"governance": map[string]any{"allowed_outbound_domains": []any{"*"}}}
	r := p.do(http.MethodPost, apiBase+"/tenants/"+tenantID+"/serverless-runtime:enable", p.AdminToken, mustJSON(t, policy))
	requireJSON(t, r, http.StatusOK, nil)
}

// token issues a token of tenantID for subject with roles.
func (p *larkProc) token(t testing.TB, tenantID, subject string, roles ...string) string {
	t.Helper()
	r := p.do(http.MethodPost, apiBase+"/tokens", p.AdminToken, mustJSON(t, map[string]any{"tenant_id": tenantID, "subject_id": subject, "roles": roles}))
	var out struct {
		Token string `json:"token"`
	}
	requireJSON(t, r, http.StatusCreated, &out)
	require.NotEmpty(t, out.Token)
	return out.Token
}

// fnSpec is a function (or workflow) to register.
type fnSpec struct {
	id     string // full GTS id
	src    string
	limits map[string]any
	owner  string // owner_type: "tenant" (default) or "user"
	retry  int    // max_attempts (default 1)
}

// register registers and activates spec with token and returns its GTS id.
func (p *larkProc) register(t testing.TB, token string, s fnSpec) string {
	t.Helper()
	limits := map[string]any{"timeout_seconds": 10, "memory_mb": 128, "cpu": 1.0}
	for k, v := range s.limits {
		limits[k] = v
	}
	owner := s.owner
	if owner == "" {
		owner = "tenant"
	}
	retry := s.retry
	if retry == 0 {
		retry = 1
	}
	body := map[string]any{
		"entrypoint_id": s.id, "title": "hostile probe", "owner": map[string]any{"owner_type": owner},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []any{"sync", "async"}, "default": "sync"},
			"limits":     limits,
			"retry":      map[string]any{"max_attempts": retry},
		},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
			"code": map[string]any{"language": "starlark", "source": s.src}},
	}
	r := p.do(http.MethodPost, apiBase+"/entrypoints", token, mustJSON(t, body))
	requireJSON(t, r, http.StatusCreated, nil)
	r = p.do(http.MethodPost, apiBase+"/entrypoints/"+url.PathEscape(s.id)+":status", token, []byte(`{"action": "activate"}`))
	requireJSON(t, r, http.StatusOK, nil)
	return s.id
}

// invocationRecord is the part of an invocation record the tests read.
type invocationRecord struct {
	ID     string          `json:"invocation_id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		TypeID   string         `json:"error_type_id"`
		Category string         `json:"category"`
		Message  string         `json:"message"`
		Details  map[string]any `json:"details"`
	} `json:"error"`
	Observability struct {
		Metrics metrics `json:"metrics"`
	} `json:"observability"`
	Node string `json:"node"`
}

// metrics are an invocation's measurements.
type metrics struct {
	DurationMS      *int64 `json:"duration_ms"`
	CPUTimeMS       *int64 `json:"cpu_time_ms"`
	MaxMemoryUsedMB *int64 `json:"max_memory_used_mb"`
	Worker          string `json:"worker"`
}

// invoke starts an invocation of id in mode and returns the answer.
func (p *larkProc) invoke(t testing.TB, token, id, mode string, params any) response {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	return p.do(http.MethodPost, apiBase+"/invocations", token, mustJSON(t, map[string]any{"entrypoint_id": id, "mode": mode, "params": params}))
}

// record decodes an invocation answer with the given status: the record itself (GET) or the
// start answer that carries it ({"record": ...}).
func record(t testing.TB, r response, status int) invocationRecord {
	t.Helper()
	var out struct {
		invocationRecord
		Record *invocationRecord `json:"record"`
	}
	requireJSON(t, r, status, &out)
	if out.Record != nil {
		return *out.Record
	}
	return out.invocationRecord
}

func errType(name string) string {
	return fmt.Sprintf("gts.x.core.serverless.err.v1~x.core.serverless.err.%s.v1~", name)
}
