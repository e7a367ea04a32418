package cost_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/cost"
	"github.com/larkrun/lark/internal/invocation"
)

func i64(v int64) *int64 { return &v }

const doc = `{
  "currency": "EUR",
  "default": {"cpu_per_second": 2, "memory_gb_per_second": 0.5, "per_invocation": 0.25, "egress_per_byte": 0.001},
  "tenant_overrides": {"globex": {"per_invocation": 1}, "initech": {"cpu_per_second": 0, "egress_per_byte": 0.5}}
}`

func TestPricesAndOverrides(t *testing.T) {
	p, err := cost.Parse([]byte(doc))
	require.NoError(t, err)
	require.Equal(t, "EUR", p.Currency())
	def := cost.Prices{CPUPerSecond: 2, MemoryGBPerSecond: 0.5, PerInvocation: 0.25, EgressPerByte: 0.001}
	require.Equal(t, def, p.For("acme"), "a tenant without an override pays the defaults")
	require.Equal(t, cost.Prices{CPUPerSecond: 2, MemoryGBPerSecond: 0.5, PerInvocation: 1, EgressPerByte: 0.001}, p.For("globex"),
		"an override replaces only the prices it names")
	require.Equal(t, cost.Prices{CPUPerSecond: 0, MemoryGBPerSecond: 0.5, PerInvocation: 0.25, EgressPerByte: 0.5}, p.For("initech"),
		"an override of 0 is free, not the default")

	// 1.5 CPU-seconds, 256 MB for 4 s (1 GB-second), 1000 bytes.
	m := invocation.Metrics{CPUTimeMS: i64(1500), MemoryLimitMB: i64(256), DurationMS: i64(3999), BilledDurationMS: i64(4000), EgressBytes: i64(1000)}
	require.Equal(t, 1.5, cost.CPUSeconds(m))
	require.Equal(t, 1.0, cost.MemoryGBSeconds(m), "memory is the configured limit over the billed duration")
	require.Equal(t, 1.5*2+1.0*0.5+1000*0.001, p.For("acme").Execution(m))
	require.Equal(t, 1.0*0.5+1000*0.5, p.For("initech").Execution(m))
	require.Zero(t, p.For("acme").Execution(invocation.Metrics{}), "no metrics, no cost")

	var none *cost.Pricing
	require.Equal(t, cost.DefaultCurrency, none.Currency())
	require.Zero(t, none.For("acme").Execution(m), "without a pricing file everything costs 0")
	require.Zero(t, none.For("acme").PerInvocation)
}

func TestParseRejects(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown member":        {`{"default": {"cpu_per_hour": 1}}`, "cpu_per_hour"},
		"unknown top level":     {`{"prices": {}}`, "prices"},
		"negative price":        {`{"default": {"egress_per_byte": -1}}`, "default.egress_per_byte"},
		"negative override":     {`{"tenant_overrides": {"acme": {"per_invocation": -0.1}}}`, "tenant_overrides.acme.per_invocation"},
		"currency":              {`{"currency": "usd"}`, "ISO 4217"},
		"tenant id":             {`{"tenant_overrides": {"Not A Tenant": {}}}`, "not a tenant id"},
		"not JSON":              {`{`, "invalid JSON"},
		"a string for a number": {`{"default": {"cpu_per_second": "0.1"}}`, "invalid JSON"},
		"two documents":         {`{} {}`, "unexpected data"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cost.Parse([]byte(tc.doc))
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := cost.Parse([]byte(`{"currency": "x", "default": {"cpu_per_second": -1}}`))
	require.ErrorContains(t, err, `currency "x"`, "every problem is reported at once")
	require.ErrorContains(t, err, "default.cpu_per_second")
	_, err = cost.Parse([]byte(`{}`))
	require.NoError(t, err, "every member is optional")
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pricing.json")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	p, err := cost.Load(path)
	require.NoError(t, err)
	require.Equal(t, 0.25, p.For("acme").PerInvocation)
	_, err = cost.Load(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorContains(t, err, "pricing")
	require.NoError(t, os.WriteFile(path, []byte(`{"default":{"cpu_per_second":-1}}`), 0o600))
	_, err = cost.Load(path)
	require.ErrorContains(t, err, path, "the error names the file")
}
