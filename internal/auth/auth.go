// Package auth holds the security context of a request, the role ladder of 004 §10.2, and API
// tokens (only a hash of each token's secret is ever stored).
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/problem"
)

// Role is one rung of the role ladder; each role includes the ones below it.
type Role string

// Roles (004 §10.2): viewer reads; operator also invokes and controls invocations; developer also
// registers and changes entrypoints, schedules and triggers; admin also manages its tenant's tokens
// and reads its policy.
const (
	RoleViewer    Role = "viewer"
	RoleOperator  Role = "operator"
	RoleDeveloper Role = "developer"
	RoleAdmin     Role = "admin"
)

// Roles lists the roles from least to most privileged.
var Roles = []Role{RoleViewer, RoleOperator, RoleDeveloper, RoleAdmin}

// Rank orders roles; an unknown role ranks 0.
func (r Role) Rank() int {
	for i, x := range Roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r.Rank() > 0 }

// SecurityContext is who is calling: 000's SecurityContext {tenant_id, subject_id, roles}. The platform
// operator (LARK_ADMIN_TOKEN) has Operator set and no tenant.
type SecurityContext struct {
	TenantID  string
	SubjectID string
	Roles     []Role
	Operator  bool
	TokenID   string
}

// Has reports whether the caller holds min or a higher role. The operator holds every role.
func (s SecurityContext) Has(min Role) bool {
	if s.Operator {
		return true
	}
	for _, r := range s.Roles {
		if r.Rank() >= min.Rank() {
			return true
		}
	}
	return false
}

type ctxKey struct{}

// WithContext returns ctx carrying sc.
func WithContext(ctx context.Context, sc SecurityContext) context.Context {
	return context.WithValue(ctx, ctxKey{}, sc)
}

// FromContext returns the SecurityContext in ctx, if any.
func FromContext(ctx context.Context) (SecurityContext, bool) {
	sc, ok := ctx.Value(ctxKey{}).(SecurityContext)
	return sc, ok
}

// Token is an API token as stored: the secret itself is never kept, only its SHA-256.
type Token struct {
	ID          string     `json:"id"`
	TenantID    string     `json:"tenant_id"`
	SubjectID   string     `json:"subject_id"`
	Roles       []Role     `json:"roles"`
	Description string     `json:"description,omitempty"`
	Hash        string     `json:"-"`
	CreatedAt   time.Time  `json:"created_at"`
	CreatedBy   string     `json:"created_by"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// Active reports whether the token may authenticate at now.
func (t Token) Active(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

// SecretPrefix starts every token secret, so leaked tokens are easy to scan for.
const SecretPrefix = "lark_"

// NewSecret returns a fresh random token secret and its hash.
func NewSecret() (secret, hash string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("token secret: %w", err)
	}
	secret = SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return secret, Hash(secret), nil
}

// LooksLikeJWT tells a JWT (three dot-separated parts, RFC 7519 §3) from Lark's own token secrets
// (SecretPrefix and base64url, no dot) without decoding anything, so a bearer credential is checked
// one way only.
func LooksLikeJWT(s string) bool {
	return strings.Count(s, ".") == 2 && !strings.HasPrefix(s, SecretPrefix)
}

// Hash is the stored form of a secret.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Equal compares two secrets in constant time.
func Equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// RequireTenantRole checks that sc acts for a tenant — the platform operator has none — with at
// least role. what names the attempt ("reading schedules", "changing triggers") in the 403.
func RequireTenantRole(sc SecurityContext, role Role, what string) error {
	if sc.Operator {
		return problem.Forbidden("the platform operator has no tenant; use a tenant token for %s", what)
	}
	if !sc.Has(role) {
		return problem.Forbidden("%s needs the %s role", what, role)
	}
	return nil
}
