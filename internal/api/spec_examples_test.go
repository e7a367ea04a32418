package api_test

// The spec's request examples, sent as written: every JSON request body 000, 001 and 002 show for
// a POST, PUT or PATCH is a fixture in testdata/spec-examples (named after its spec and section),
// and each answers 2xx once what it depends on (its entrypoint, secret, schedule…) is registered.
// The only changes made to an example are the spec README's reconciliation mappings, written into
// the fixture as "mapped" with the rule that makes them ("mapping"): 001's and 002's older id
// family and definition_id become 000's, their paths 000's resources. An example the README says
// Lark serves differently is skipped with the README's reason ("skip").
//
// The examples, and which are covered (checked by TestSpecExampleFixturesAreListed):
//
//	000-entrypoint-status-actions               covered   POST /entrypoints/{id}:status
//	000-invocation-control-actions              covered   POST /invocations/{id}:control
//	000-start-invocation-request                covered   POST /invocations (000 elides the id; calculate_tax's)
//	000-schedule-instance-example               covered   POST /schedules (read-only members ignored)
//	000-trigger-instance-example                covered   POST /triggers (read-only members ignored)
//	000-tenant-runtime-policy-instance-example  covered   PUT /tenants/t_123/runtime-policy
//	001-1-register-definition                   skipped   001's /definitions shape is not served (README rule 1)
//	001-3-publish-definition                    covered   as :status activate (README rule 2)
//	001-4-update-definition                     skipped   not JSON; a new version is a new registration (README rule 1)
//	001-9-deprecate-definition                  covered   as :status deprecate (README rule 2)
//	001-enable-tenant                           covered   POST /tenants/acme/serverless-runtime:enable
//	001-update-tenant-quotas                    covered   PATCH /tenants/acme/serverless-runtime
//	002-schedule-1-create                       covered   POST /schedules (002's member names are aliases)
//	002-schedule-3-update                       covered   PATCH /schedules/{id}
//	002-schedule-5-resume                       covered   POST /schedules/{id}:resume
//	002-schedule-9-trigger-now                  covered   POST /schedules/{id}:trigger
//	002-event-trigger-1-create                  covered   POST /triggers (002's /event-triggers, README rule 1)
//	002-webhook-trigger-1-create                covered   POST /webhook-triggers (002's member names are aliases)
//
// Examples without a request body (002's :pause, :enable/:disable, :regenerate-secret, the
// DELETEs and GETs) are not fixtures: there is nothing to send as written.

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/server"
)

const specExamplesDir = "testdata/spec-examples"

// specExample is one fixture.
type specExample struct {
	Spec    string          `json:"spec"`
	Section string          `json:"section"`
	Line    int             `json:"line"`
	Method  string          `json:"method"`
	Path    string          `json:"path"`
	Body    json.RawMessage `json:"body"`
	// BodyText is an example that is not JSON as written.
	BodyText string `json:"body_text"`
	// Mapped is the request after the README's mappings: a path or body replacing the example's.
	Mapped *struct {
		Path string          `json:"path"`
		Body json.RawMessage `json:"body"`
	} `json:"mapped"`
	Mapping string `json:"mapping"`
	// Skip is the README's reason Lark serves the example differently.
	Skip string `json:"skip"`
}

// request is the request to send: the example with its mappings applied.
func (x specExample) request() (method, path string, body []byte) {
	path, body = x.Path, x.Body
	if x.Mapped != nil {
		if x.Mapped.Path != "" {
			path = x.Mapped.Path
		}
		if x.Mapped.Body != nil {
			body = x.Mapped.Body
		}
	}
	return x.Method, path, body
}

// specExampleNames are the fixtures, in the order of the table above.
var specExampleNames = []string{
	"000-entrypoint-status-actions", "000-invocation-control-actions", "000-start-invocation-request",
	"000-schedule-instance-example", "000-trigger-instance-example", "000-tenant-runtime-policy-instance-example",
	"001-1-register-definition", "001-3-publish-definition", "001-4-update-definition", "001-9-deprecate-definition",
	"001-enable-tenant", "001-update-tenant-quotas",
	"002-schedule-1-create", "002-schedule-3-update", "002-schedule-5-resume", "002-schedule-9-trigger-now",
	"002-event-trigger-1-create", "002-webhook-trigger-1-create",
}

func loadSpecExample(t *testing.T, name string) specExample {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(specExamplesDir, name+".json"))
	require.NoError(t, err)
	var x specExample
	require.NoError(t, json.Unmarshal(raw, &x), name)
	require.NotEmpty(t, x.Spec, name)
	require.NotEmpty(t, x.Section, name)
	return x
}

// TestSpecExampleFixturesAreListed keeps the table above true: every fixture is listed, every
// listed one exists, and each either has a body to send or a skip reason.
func TestSpecExampleFixturesAreListed(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(specExamplesDir, "*.json"))
	require.NoError(t, err)
	var got []string
	for _, f := range files {
		got = append(got, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	want := slices.Clone(specExampleNames)
	slices.Sort(want)
	require.Equal(t, want, got)
	for _, name := range specExampleNames {
		x := loadSpecExample(t, name)
		_, _, body := x.request()
		require.True(t, x.Skip != "" || json.Valid(body), "%s: a JSON body to send, or a reason to skip", name)
		require.True(t, x.Skip != "" || specExampleSetup[name] != nil, "%s: no setup", name)
	}
}

func TestSpecRequestExamplesAccepted(t *testing.T) {
	t.Parallel()
	for _, name := range specExampleNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			x := loadSpecExample(t, name)
			if x.Skip != "" {
				t.Skipf("spec %s line %d (%s): %s", x.Spec, x.Line, x.Section, x.Skip)
			}
			e := specExampleEnv(t)
			token, vars := specExampleSetup[name](t, e)
			method, path, body := x.request()
			for k, v := range vars {
				path = strings.ReplaceAll(path, "{"+k+"}", v)
			}
			r := e.send(t, request{method: method, path: base + path, token: token, body: body})
			require.True(t, r.Status >= 200 && r.Status < 300, "spec %s line %d (%s), %s %s as written: %s", x.Spec, x.Line, x.Section, method, path, r)
		})
	}
}

// specExampleEnv is a server with a master key (webhook and tenant secrets).
func specExampleEnv(t *testing.T) *env {
	t.Helper()
	setting, err := keyring.Generate()
	require.NoError(t, err)
	kr, err := keyring.Parse(setting)
	require.NoError(t, err)
	return newEnv(t, func(c *server.Config) { c.Keyring = kr })
}

// exampleSetup registers what an example depends on and returns the token to send it with and
// the values of its path's {placeholders}.
type exampleSetup func(t *testing.T, e *env) (token string, vars map[string]string)

// taxActive registers the README's calculate_tax (active) for tenant acme; mods adjust it.
func taxActive(t *testing.T, e *env, mods ...func(obj)) (string, string) {
	t.Helper()
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, fn(t, taxV1, append([]func(obj){del("traits.rate_limit")}, mods...)...))
	return adm, ep["id"].(string)
}

// reportSchedule is 002's schedule, created from its own create example.
func reportSchedule(t *testing.T, e *env) string {
	t.Helper()
	adm := invTenant(t, e, "acme")
	e.registerActive(t, adm, echoFn(t, "billing.generate_tax_report.v1~"))
	_, path, body := loadSpecExample(t, "002-schedule-1-create").request()
	e.expect(t, http.StatusCreated, http.MethodPost, base+path, adm, body)
	return adm
}

var specExampleSetup = map[string]exampleSetup{
	"000-entrypoint-status-actions": func(t *testing.T, e *env) (string, map[string]string) {
		adm, id := taxActive(t, e)
		return adm, map[string]string{"id": id}
	},
	"000-invocation-control-actions": func(t *testing.T, e *env) (string, map[string]string) {
		adm, _ := taxActive(t, e)
		// No dispatcher runs in this server: the async invocation stays queued, where cancel applies.
		rec, _ := invCall(t, e, adm, http.StatusAccepted, obj{"entrypoint_id": taxV1, "mode": "async",
			"params": obj{"invoice_id": "inv_001", "amount": 100}}, nil)
		return adm, map[string]string{"invocation_id": invID(rec)}
	},
	"000-start-invocation-request": func(t *testing.T, e *env) (string, map[string]string) {
		adm, _ := taxActive(t, e)
		return adm, nil
	},
	"000-schedule-instance-example": func(t *testing.T, e *env) (string, map[string]string) {
		// The example's input_overrides carry only a region: the schema's other params have
		// defaults here, as a scheduled calculate_tax would need.
		adm, _ := taxActive(t, e, set("schema.params.properties.invoice_id.default", "scheduled"),
			set("schema.params.properties.amount.default", 100))
		return adm, nil
	},
	"000-trigger-instance-example": func(t *testing.T, e *env) (string, map[string]string) {
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, workflow(t, wfPrefix+"vendor.app.orders.process_approval.v1~", del("traits.rate_limit")))
		return adm, nil
	},
	"000-tenant-runtime-policy-instance-example": func(t *testing.T, e *env) (string, map[string]string) {
		e.enable(t, "t_123", obj{})
		return operator, nil
	},
	"001-3-publish-definition": func(t *testing.T, e *env) (string, map[string]string) {
		adm := invTenant(t, e, "acme")
		ep := e.register(t, adm, fn(t, taxV1))
		return adm, map[string]string{"id": ep["id"].(string)}
	},
	"001-9-deprecate-definition": func(t *testing.T, e *env) (string, map[string]string) {
		adm, id := taxActive(t, e)
		return adm, map[string]string{"id": id}
	},
	"001-enable-tenant": func(t *testing.T, e *env) (string, map[string]string) { return operator, nil },
	"001-update-tenant-quotas": func(t *testing.T, e *env) (string, map[string]string) {
		e.enable(t, "acme", obj{})
		return operator, nil
	},
	"002-schedule-1-create": func(t *testing.T, e *env) (string, map[string]string) {
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, echoFn(t, "billing.generate_tax_report.v1~"))
		return adm, nil
	},
	"002-schedule-3-update": func(t *testing.T, e *env) (string, map[string]string) { return reportSchedule(t, e), nil },
	"002-schedule-5-resume": func(t *testing.T, e *env) (string, map[string]string) {
		adm := reportSchedule(t, e)
		e.expect(t, http.StatusOK, http.MethodPost, base+"/schedules/daily-tax-report:pause", adm, nil)
		return adm, nil
	},
	"002-schedule-9-trigger-now": func(t *testing.T, e *env) (string, map[string]string) { return reportSchedule(t, e), nil },
	"002-event-trigger-1-create": func(t *testing.T, e *env) (string, map[string]string) {
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, echoFn(t, "orders.process_order.v1~"))
		return adm, nil
	},
	"002-webhook-trigger-1-create": func(t *testing.T, e *env) (string, map[string]string) {
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, echoFn(t, "ci.handle_push.v1~"))
		e.expect(t, http.StatusCreated, http.MethodPost, base+"/secrets", adm,
			obj{"name": "github_webhook_secret", "value": "github-shared-secret-0123456789", "allowed_hosts": []any{"github.com"}})
		return adm, nil
	},
}
