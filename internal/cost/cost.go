// Package cost prices executions (004 §22 cost attribution). The operator configures prices per
// CPU-second, per memory GB-second, per invocation and per egress byte, with per-tenant overrides;
// the completion stage (internal/complete) prices each execution as it ends and records the amount
// in the event that closes it, so the event log stays the source of truth: changing prices later
// never changes what past work cost.
//
// Amounts are float64 in the currency's main unit (e.g. 0.0000125 USD). Integer micro-units would
// round the cost of a short execution to zero; float64 keeps about 15 significant digits, and sums
// may differ from a decimal computation in the last of them.
package cost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/larkrun/lark/internal/invocation"
)

// DefaultCurrency is the currency when the pricing file names none (and when there is no file).
const DefaultCurrency = "USD"

// Prices are the unit prices of one tenant.
type Prices struct {
	// CPUPerSecond is the price of one second of CPU time (cpu_time_ms / 1000).
	CPUPerSecond float64 `json:"cpu_per_second"`
	// MemoryGBPerSecond is the price of one GB-second of memory: the entrypoint's configured
	// memory_limit_mb / 1024 × the billed duration in seconds (Lambda-style: what is reserved, not
	// what is used).
	MemoryGBPerSecond float64 `json:"memory_gb_per_second"`
	// PerInvocation is charged once per invocation, when it is created (retries are executions of
	// the same invocation and do not pay it again).
	PerInvocation float64 `json:"per_invocation"`
	// EgressPerByte is the price of one byte of r_http_* request or response body.
	EgressPerByte float64 `json:"egress_per_byte"`
}

// Execution is the cost of one execution with metrics m:
//
//	cpu_time_ms/1000 × cpu_per_second
//	+ memory_limit_mb/1024 × billed_duration_ms/1000 × memory_gb_per_second
//	+ egress_bytes × egress_per_byte
func (p Prices) Execution(m invocation.Metrics) float64 {
	return CPUSeconds(m)*p.CPUPerSecond + MemoryGBSeconds(m)*p.MemoryGBPerSecond + float64(val(m.EgressBytes))*p.EgressPerByte
}

// CPUSeconds is m's CPU time in seconds.
func CPUSeconds(m invocation.Metrics) float64 { return float64(val(m.CPUTimeMS)) / 1000 }

// MemoryGBSeconds is m's configured memory limit over its billed duration, in GB-seconds.
func MemoryGBSeconds(m invocation.Metrics) float64 {
	return float64(val(m.MemoryLimitMB)) / 1024 * float64(val(m.BilledDurationMS)) / 1000
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// Pricing is the operator's pricing configuration: a currency, default prices and per-tenant
// overrides. The zero value (and nil) prices everything at 0 in DefaultCurrency.
type Pricing struct {
	currency string
	def      Prices
	tenants  map[string]Prices
}

// Currency is the ISO 4217 code every amount is in.
func (p *Pricing) Currency() string {
	if p == nil || p.currency == "" {
		return DefaultCurrency
	}
	return p.currency
}

// For returns the prices of a tenant: its override where it has one, the defaults otherwise.
func (p *Pricing) For(tenantID string) Prices {
	if p == nil {
		return Prices{}
	}
	if t, ok := p.tenants[tenantID]; ok {
		return t
	}
	return p.def
}

// overrides are a tenant's prices in the file: every member is optional and falls back to the
// default.
type overrides struct {
	CPUPerSecond      *float64 `json:"cpu_per_second"`
	MemoryGBPerSecond *float64 `json:"memory_gb_per_second"`
	PerInvocation     *float64 `json:"per_invocation"`
	EgressPerByte     *float64 `json:"egress_per_byte"`
}

// file is the pricing file's format.
type file struct {
	Currency        string               `json:"currency"`
	Default         overrides            `json:"default"`
	TenantOverrides map[string]overrides `json:"tenant_overrides"`
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Load reads a pricing file (see Parse).
func Load(path string) (*Pricing, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pricing: %w", err)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("pricing %s: %w", path, err)
	}
	return p, nil
}

// Parse reads a pricing document:
//
//	{"currency": "USD",
//	 "default": {"cpu_per_second": 0.000024, "memory_gb_per_second": 0.0000025,
//	             "per_invocation": 0.0000002, "egress_per_byte": 0.00000000012},
//	 "tenant_overrides": {"acme": {"cpu_per_second": 0.00002}}}
//
// Every member is optional (an absent price is 0; an absent override member is the default's).
// Unknown members, negative or non-finite prices, a currency that is not three upper-case letters
// and malformed tenant ids are errors: a price that is not understood must not be silently 0.
func Parse(b []byte) (*Pricing, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid JSON: unexpected data after the document")
	}
	var problems []string
	if f.Currency == "" {
		f.Currency = DefaultCurrency
	}
	if !currencyRE.MatchString(f.Currency) {
		problems = append(problems, fmt.Sprintf("currency %q: want an ISO 4217 code such as USD", f.Currency))
	}
	def := apply(Prices{}, f.Default)
	problems = append(problems, check("default", def)...)
	p := &Pricing{currency: f.Currency, def: def, tenants: map[string]Prices{}}
	ids := make([]string, 0, len(f.TenantOverrides))
	for id := range f.TenantOverrides {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !tenantRE.MatchString(id) {
			problems = append(problems, fmt.Sprintf("tenant_overrides: %q is not a tenant id", id))
			continue
		}
		t := apply(def, f.TenantOverrides[id])
		problems = append(problems, check("tenant_overrides."+id, t)...)
		p.tenants[id] = t
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return p, nil
}

// tenantRE matches tenant ids (tenant.ValidID without the reserved-name rule: the platform's own
// invocations may be priced too).
var tenantRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// apply returns base with o's members applied.
func apply(base Prices, o overrides) Prices {
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&base.CPUPerSecond, o.CPUPerSecond)
	set(&base.MemoryGBPerSecond, o.MemoryGBPerSecond)
	set(&base.PerInvocation, o.PerInvocation)
	set(&base.EgressPerByte, o.EgressPerByte)
	return base
}

func check(where string, p Prices) []string {
	var out []string
	for _, f := range []struct {
		name string
		v    float64
	}{{"cpu_per_second", p.CPUPerSecond}, {"memory_gb_per_second", p.MemoryGBPerSecond},
		{"per_invocation", p.PerInvocation}, {"egress_per_byte", p.EgressPerByte}} {
		if f.v < 0 || math.IsInf(f.v, 0) || math.IsNaN(f.v) {
			out = append(out, fmt.Sprintf("%s.%s: a price must be a finite number ≥ 0, got %v", where, f.name, f.v))
		}
	}
	return out
}
