// Package tenant holds the TenantRuntimePolicy (000) with 001's governance settings folded into
// `policies`, and the rules for enabling, disabling and changing it.
package tenant

import (
	"regexp"
	"time"
)

// Policy is 000's TenantRuntimePolicy plus Lark's bookkeeping timestamps.
type Policy struct {
	TenantID    string      `json:"tenant_id"`
	Enabled     bool        `json:"enabled"`
	Quotas      Quotas      `json:"quotas"`
	Retention   Retention   `json:"retention"`
	Policies    Governance  `json:"policies"`
	Idempotency Idempotency `json:"idempotency"`
	Defaults    Defaults    `json:"defaults"`
	Fairness    Fairness    `json:"fairness"`
	EnabledAt   *time.Time  `json:"enabled_at"`
	DisabledAt  *time.Time  `json:"disabled_at"`
	CreatedAt   time.Time   `json:"created_at"`
	UpdatedAt   time.Time   `json:"updated_at"`
}

// Quotas are 000's TenantQuotas; a nil field means "no limit".
type Quotas struct {
	MaxConcurrentExecutions     *int64   `json:"max_concurrent_executions,omitempty"`
	MaxDefinitions              *int64   `json:"max_definitions,omitempty"`
	MaxSchedules                *int64   `json:"max_schedules,omitempty"`
	MaxTriggers                 *int64   `json:"max_triggers,omitempty"`
	MaxExecutionHistoryMB       *int64   `json:"max_execution_history_mb,omitempty"`
	MaxMemoryPerExecutionMB     *int64   `json:"max_memory_per_execution_mb,omitempty"`
	MaxCPUPerExecution          *float64 `json:"max_cpu_per_execution,omitempty"`
	MaxExecutionDurationSeconds *int64   `json:"max_execution_duration_seconds,omitempty"`
}

// Retention is 000's retention block.
type Retention struct {
	ExecutionHistoryDays int64 `json:"execution_history_days"`
	AuditLogDays         int64 `json:"audit_log_days"`
}

// Governance is 000's `policies` with 001's governance settings.
type Governance struct {
	// AllowedRuntimes lists adapter GTS ids; empty means every adapter the platform has.
	AllowedRuntimes []string `json:"allowed_runtimes"`
	// RequireApprovalForPublish makes activation an admin-only action.
	RequireApprovalForPublish bool `json:"require_approval_for_publish"`
	// AllowedOutboundDomains is the egress allowlist for r_http_* (host names, "*.example.com" wildcards).
	AllowedOutboundDomains []string `json:"allowed_outbound_domains"`
	// RequireRegisteredEventTypes refuses (422) published events whose type neither the tenant nor
	// the platform registered (POST /event-types); by default they are accepted unvalidated.
	RequireRegisteredEventTypes bool `json:"require_registered_event_types"`
	// AllowTenantIdentityProviders lets the tenant's admins register the tenant's own OIDC issuer
	// (POST /identity-providers); its tokens then speak for this tenant only, and only while this
	// stays on. Issuers the platform operator registered for the tenant do not depend on it.
	// Default false.
	AllowTenantIdentityProviders bool `json:"allow_tenant_identity_providers"`
}

// Idempotency is 000's idempotency block.
type Idempotency struct {
	DeduplicationWindowSeconds int64 `json:"deduplication_window_seconds"`
}

// Defaults are the limits applied to new entrypoints that do not set them.
type Defaults struct {
	TimeoutSeconds int64   `json:"timeout_seconds"`
	MemoryMB       int64   `json:"memory_mb"`
	CPU            float64 `json:"cpu"`
}

// Fairness is Lark's dispatch weight for the tenant (004 §5.1, the fairness_weight of its tenant
// quotas): under contention the dispatcher gives each tenant with runnable work a share of claims
// proportional to Weight. Only the platform operator sets it.
type Fairness struct {
	Weight float64 `json:"weight"`
}

// DefaultWeight is the fairness weight of a tenant that has not been given one.
const DefaultWeight = 1.0

// MaxWeight bounds fairness weights.
const MaxWeight = 1000.0

// DispatchWeight is the tenant's fairness weight (DefaultWeight when unset).
func (p Policy) DispatchWeight() float64 {
	if p.Fairness.Weight <= 0 {
		return DefaultWeight
	}
	return p.Fairness.Weight
}

// New returns the default policy for a tenant (enabled=false until :enable).
func New(tenantID string, now time.Time) Policy {
	return Policy{
		TenantID:    tenantID,
		Retention:   Retention{ExecutionHistoryDays: 7, AuditLogDays: 90},
		Policies:    Governance{AllowedRuntimes: []string{}, AllowedOutboundDomains: []string{}},
		Idempotency: Idempotency{DeduplicationWindowSeconds: 86400},
		Defaults:    Defaults{TimeoutSeconds: 30, MemoryMB: 128, CPU: 0.2},
		Fairness:    Fairness{Weight: DefaultWeight},
		CreatedAt:   now,
		UpdatedAt:   now,
	}
}

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidID reports whether id is an acceptable tenant id: 1-63 of [a-z0-9_-], starting with a letter or
// digit, and not the reserved platform tenant.
func ValidID(id string) bool { return idRE.MatchString(id) && id != "platform" }

// AllowsAdapter reports whether the policy allows entrypoints on adapter.
func (p Policy) AllowsAdapter(adapter string) bool {
	if len(p.Policies.AllowedRuntimes) == 0 {
		return true
	}
	for _, a := range p.Policies.AllowedRuntimes {
		if a == adapter {
			return true
		}
	}
	return false
}
