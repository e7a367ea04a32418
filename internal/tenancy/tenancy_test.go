package tenancy

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tenant"
)

var op = auth.SecurityContext{SubjectID: "operator", Operator: true}

func newService(t *testing.T) (*Service, *clock.Fake) {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return NewService(st, c, idgen.UUIDv7{}), c
}

func issuesOf(t *testing.T, err error) []problem.Issue {
	t.Helper()
	pe := problem.From(err)
	require.Equal(t, 422, pe.Status, "%v", err)
	return pe.Issues
}

func TestEnableWith001BodyMapsOnto000(t *testing.T) {
	s, c := newService(t)
	ctx := context.Background()
	p, err := s.Enable(ctx, op, "acme", []byte(`{"quotas":{"max_definitions":100,"max_memory_mb_per_execution":256,"execution_history_retention_days":30},
		"governance":{"allowed_runtimes":["gts.x.core.serverless.adapter.starlark.v1~"],"require_approval_for_publish":true,"allowed_outbound_domains":["*.example.com","api.stripe.com"]}}`))
	require.NoError(t, err)
	require.True(t, p.Enabled)
	require.Equal(t, c.Now(), *p.EnabledAt)
	require.Equal(t, int64(100), *p.Quotas.MaxDefinitions)
	require.Equal(t, int64(256), *p.Quotas.MaxMemoryPerExecutionMB)
	require.Equal(t, int64(30), p.Retention.ExecutionHistoryDays)
	require.Equal(t, []string{"*.example.com", "api.stripe.com"}, p.Policies.AllowedOutboundDomains)
	require.True(t, p.Policies.RequireApprovalForPublish)
	require.NoError(t, s.RequireEnabled(ctx, "acme"))

	c.Advance(time.Hour)
	p, err = s.Disable(ctx, op, "acme")
	require.NoError(t, err)
	require.False(t, p.Enabled)
	require.Equal(t, int64(100), *p.Quotas.MaxDefinitions, "disabling keeps the settings")
	require.Equal(t, 403, problem.From(s.RequireEnabled(ctx, "acme")).Status)
	require.Equal(t, 403, problem.From(s.RequireEnabled(ctx, "never")).Status)
}

func TestPatchIsAMergePatch(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	_, err := s.Enable(ctx, op, "acme", []byte(`{"quotas":{"max_definitions":5,"max_schedules":3}}`))
	require.NoError(t, err)
	p, err := s.Patch(ctx, op, "acme", []byte(`{"quotas":{"max_definitions":null,"max_triggers":0},"idempotency":{"deduplication_window_seconds":3600}}`))
	require.NoError(t, err)
	require.Nil(t, p.Quotas.MaxDefinitions, "null removes the quota")
	require.Equal(t, int64(3), *p.Quotas.MaxSchedules, "untouched members stay")
	require.Equal(t, int64(0), *p.Quotas.MaxTriggers)
	require.Equal(t, int64(3600), p.Idempotency.DeduplicationWindowSeconds)
	require.True(t, p.Enabled, "patch does not change enablement")
	_, err = s.Patch(ctx, op, "missing", []byte(`{}`))
	require.Equal(t, 404, problem.From(err).Status)
}

func TestPatchValidation(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	_, err := s.Enable(ctx, op, "acme", nil)
	require.NoError(t, err)
	cases := map[string]string{
		`{"enabled":false,"colour":"red"}`:                         "$.colour",
		`{"quotas":{"bogus":1}}`:                                   "$.quotas.bogus",
		`{"quotas":{"max_definitions":0}}`:                         "$.quotas.max_definitions",
		`{"quotas":{"max_definitions":"ten"}}`:                     "$.quotas",
		`{"idempotency":{"deduplication_window_seconds":10}}`:      "$.idempotency.deduplication_window_seconds",
		`{"policies":{"allowed_outbound_domains":["HTTP://x"]}}`:   "$.policies.allowed_outbound_domains[0]",
		`{"policies":{"allowed_runtimes":["gts.x.core.a.b.v1~"]}}`: "$.policies.allowed_runtimes[0]",
		`{"retention":{"audit_log_days":0}}`:                       "$.retention.audit_log_days",
	}
	for body, path := range cases {
		_, err := s.Patch(ctx, op, "acme", []byte(body))
		is := issuesOf(t, err)
		found := false
		for _, i := range is {
			found = found || i.Path == path || (path == "$.quotas" && len(i.Path) >= len(path) && i.Path[:len(path)] == path)
		}
		require.True(t, found, "%s: want an issue at %s, got %+v", body, path, is)
	}
	_, err = s.Patch(ctx, op, "acme", []byte(`not json`))
	require.Equal(t, 400, problem.From(err).Status)
	p, err := s.Policy(ctx, op, "acme")
	require.NoError(t, err)
	require.Equal(t, tenant.New("acme", p.CreatedAt).Quotas, p.Quotas, "rejected patches change nothing")
}

func TestAccessRules(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	_, err := s.Enable(ctx, op, "acme", nil)
	require.NoError(t, err)
	admin := auth.SecurityContext{TenantID: "acme", SubjectID: "a", Roles: []auth.Role{auth.RoleAdmin}}
	dev := auth.SecurityContext{TenantID: "acme", SubjectID: "d", Roles: []auth.Role{auth.RoleDeveloper}}
	outsider := auth.SecurityContext{TenantID: "other", SubjectID: "o", Roles: []auth.Role{auth.RoleAdmin}}
	_, err = s.Policy(ctx, admin, "acme")
	require.NoError(t, err)
	_, err = s.Policy(ctx, dev, "acme")
	require.Equal(t, 403, problem.From(err).Status)
	_, err = s.Policy(ctx, outsider, "acme")
	require.Equal(t, 404, problem.From(err).Status)
	_, err = s.Enable(ctx, admin, "acme", nil)
	require.Equal(t, 403, problem.From(err).Status, "only the operator enables")
	_, err = s.Disable(ctx, outsider, "acme")
	require.Equal(t, 404, problem.From(err).Status, "another tenant is not even revealed")
	_, err = s.Enable(ctx, op, "platform", nil)
	require.Equal(t, 422, problem.From(err).Status, "the platform tenant id is reserved")
}
