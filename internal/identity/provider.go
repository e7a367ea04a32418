// Package identity holds the identity providers (OIDC issuers) whose JWTs Lark accepts beside its
// own API tokens: what an issuer is trusted for, and the rules that keep a registration safe. It is
// pure: verification lives in oidcauth, persistence in the store, the API in federation.
package identity

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/problem"
)

// Provider is one trusted issuer. A platform issuer (TenantID "") names the tenant of each token
// through Claims.Tenant and may make its users platform operators; a tenant-owned issuer speaks for
// TenantID only, whatever its tokens say.
type Provider struct {
	ID        string   `json:"id"`
	TenantID  string   `json:"tenant_id,omitempty"`
	Issuer    string   `json:"issuer"`
	Audiences []string `json:"audiences"`
	// Algorithms are the JWS algorithms accepted (default DefaultAlgorithms); asymmetric only.
	Algorithms []string `json:"algorithms"`
	// ClockSkewSeconds is the leeway on exp and nbf (default DefaultClockSkew).
	ClockSkewSeconds int64  `json:"clock_skew_seconds"`
	Claims           Claims `json:"claims"`
	// RoleMapping maps a value of the Claims.Roles claim (a group) to a Lark role.
	RoleMapping map[string]auth.Role `json:"role_mapping"`
	// OperatorGroups are the values of the Claims.Roles claim that make the caller the platform
	// operator (platform issuers only).
	OperatorGroups []string  `json:"operator_groups,omitempty"`
	Description    string    `json:"description,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	CreatedBy      string    `json:"created_by"`
	// RegisteredBy is who registered the provider, set by the server (never from a request body):
	// RegisteredByOperator or RegisteredByTenantAdmin. Empty on providers stored before it
	// existed; FollowsTenantPolicy reads an empty one on a tenant-owned provider as a tenant
	// admin's.
	RegisteredBy Registrar `json:"registered_by,omitempty"`
}

// Registrar is who registered a provider.
type Registrar string

// The registrars of a provider.
const (
	// RegisteredByOperator: the platform operator, through the API or its identity provider
	// file. Every platform issuer is the operator's; so may be a tenant-owned one it registered
	// for a tenant.
	RegisteredByOperator Registrar = "platform_operator"
	// RegisteredByTenantAdmin: a tenant admin, for its own tenant, while the tenant's policy
	// allowed tenant identity providers.
	RegisteredByTenantAdmin Registrar = "tenant_admin"
)

// Registrars lists the registrars, in the order the API documents them.
var Registrars = []Registrar{RegisteredByOperator, RegisteredByTenantAdmin}

// FollowsTenantPolicy reports whether the provider signs callers in only while its tenant's
// policy sets allow_tenant_identity_providers: a tenant-owned provider a tenant admin registered,
// or one whose registrar is unknown (stored before RegisteredBy existed: the conservative
// reading). Platform issuers and the issuers the operator registered for a tenant never do: the
// flag is about tenant admins' self-service.
func (p Provider) FollowsTenantPolicy() bool {
	return p.TenantID != "" && p.RegisteredBy != RegisteredByOperator
}

// Claims names the token claims Lark reads.
type Claims struct {
	// Subject is the claim giving the caller's subject id (default "sub").
	Subject string `json:"subject"`
	// Tenant is the claim giving the tenant: required for a platform issuer; for a tenant-owned
	// one, optional, and a token whose claim names another tenant is refused.
	Tenant string `json:"tenant,omitempty"`
	// Roles is the claim holding the caller's groups or roles (a string or an array of strings).
	Roles string `json:"roles,omitempty"`
}

// Scope is "platform" for a platform issuer, "tenant" for a tenant-owned one.
func (p Provider) Scope() string {
	if p.TenantID == "" {
		return "platform"
	}
	return "tenant"
}

// Skew is the leeway on exp and nbf.
func (p Provider) Skew() time.Duration { return time.Duration(p.ClockSkewSeconds) * time.Second }

// DefaultAlgorithms are accepted when a provider names none.
var DefaultAlgorithms = []string{"RS256", "ES256"}

// AsymmetricAlgorithms are the only algorithms a provider may accept: never "none", never an HMAC
// (whose key would be the issuer's public key in an RS/HS confusion attack).
var AsymmetricAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// DefaultClockSkew and MaxClockSkew bound the leeway on exp and nbf, in seconds.
const (
	DefaultClockSkew = 60
	MaxClockSkew     = 300
)

// Normalize fills the defaults of fields left out.
func (p *Provider) Normalize() {
	p.Issuer = strings.TrimSpace(p.Issuer)
	if len(p.Algorithms) == 0 {
		p.Algorithms = slices.Clone(DefaultAlgorithms)
	}
	if p.ClockSkewSeconds == 0 {
		p.ClockSkewSeconds = DefaultClockSkew
	}
	if p.Claims.Subject == "" {
		p.Claims.Subject = "sub"
	}
	if p.RoleMapping == nil {
		p.RoleMapping = map[string]auth.Role{}
	}
}

// Validate reports what is wrong with a normalized provider, with JSON paths.
func (p Provider) Validate() []problem.Issue {
	var out []problem.Issue
	bad := func(path, format string, args ...any) {
		out = append(out, problem.Issue{Path: path, Code: "INVALID_VALUE", Message: fmt.Sprintf(format, args...)})
	}
	if err := ValidIssuer(p.Issuer); err != "" {
		bad("$.issuer", "%s", err)
	}
	if len(p.Audiences) == 0 {
		bad("$.audiences", "at least one audience is required (the client id or API audience tokens carry in aud)")
	}
	for i, a := range p.Audiences {
		if a == "" || len(a) > 200 {
			bad(fmt.Sprintf("$.audiences[%d]", i), "an audience is 1-200 characters")
		}
	}
	for i, a := range p.Algorithms {
		if !slices.Contains(AsymmetricAlgorithms, a) {
			bad(fmt.Sprintf("$.algorithms[%d]", i), "algorithm %q is not accepted; use one of %s", a, strings.Join(AsymmetricAlgorithms, ", "))
		}
	}
	if p.ClockSkewSeconds < 0 || p.ClockSkewSeconds > MaxClockSkew {
		bad("$.clock_skew_seconds", "clock_skew_seconds is from 0 to %d", MaxClockSkew)
	}
	out = append(out, p.validateClaims()...)
	return out
}

func (p Provider) validateClaims() []problem.Issue {
	var out []problem.Issue
	bad := func(path, format string, args ...any) {
		out = append(out, problem.Issue{Path: path, Code: "INVALID_VALUE", Message: fmt.Sprintf(format, args...)})
	}
	if p.TenantID == "" && p.Claims.Tenant == "" {
		bad("$.claims.tenant", "a platform issuer needs the claim that names the tenant (or give tenant_id for a tenant-owned issuer)")
	}
	if (len(p.RoleMapping) > 0 || len(p.OperatorGroups) > 0) && p.Claims.Roles == "" {
		bad("$.claims.roles", "role_mapping and operator_groups need the claim that holds the groups")
	}
	keys := make([]string, 0, len(p.RoleMapping))
	for k := range p.RoleMapping {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !p.RoleMapping[k].Valid() {
			bad("$.role_mapping."+k, "unknown role %q (viewer, operator, developer, admin)", p.RoleMapping[k])
		}
	}
	if p.TenantID != "" && len(p.OperatorGroups) > 0 {
		bad("$.operator_groups", "a tenant-owned issuer cannot make anyone the platform operator")
	}
	return out
}

// ValidIssuer returns why issuer is not an acceptable issuer URL ("" when it is): an absolute
// https URL without query, fragment or user info (OpenID Connect Discovery §3).
func ValidIssuer(issuer string) string {
	u, err := url.Parse(issuer)
	switch {
	case issuer == "" || len(issuer) > 500:
		return "issuer is required (an https URL of at most 500 characters)"
	case err != nil || u.Scheme != "https" || u.Host == "":
		return "issuer must be an absolute https URL"
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "issuer must not carry a query, a fragment or user info"
	}
	return ""
}

// Grant maps the claim values of a verified token to a security context: subject, the tenant
// (fixed for a tenant-owned issuer, refused when the token names another), roles by RoleMapping,
// and the operator by OperatorGroups. The error says what is missing, never the token.
func (p Provider) Grant(subject, tenant string, groups []string) (auth.SecurityContext, error) {
	if subject == "" {
		return auth.SecurityContext{}, fmt.Errorf("the token has no %q claim", p.Claims.Subject)
	}
	sc := auth.SecurityContext{SubjectID: subject}
	for _, g := range groups {
		if p.TenantID == "" && slices.Contains(p.OperatorGroups, g) {
			sc.Operator = true
		}
		if r, ok := p.RoleMapping[g]; ok && !slices.Contains(sc.Roles, r) {
			sc.Roles = append(sc.Roles, r)
		}
	}
	if sc.Operator {
		return auth.SecurityContext{SubjectID: subject, Operator: true, Roles: []auth.Role{auth.RoleAdmin}}, nil
	}
	switch {
	case p.TenantID != "" && tenant != "" && tenant != p.TenantID:
		return auth.SecurityContext{}, fmt.Errorf("the token names another tenant than its issuer's")
	case p.TenantID != "":
		sc.TenantID = p.TenantID
	case tenant == "":
		return auth.SecurityContext{}, fmt.Errorf("the token has no %q claim", p.Claims.Tenant)
	default:
		sc.TenantID = tenant
	}
	if len(sc.Roles) == 0 {
		return auth.SecurityContext{}, fmt.Errorf("no group of the token maps to a role")
	}
	slices.SortFunc(sc.Roles, func(a, b auth.Role) int { return a.Rank() - b.Rank() })
	return sc, nil
}
