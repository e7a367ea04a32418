// Package tokens authenticates bearer tokens and manages API tokens (issue, list, revoke).
package tokens

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

// Store is the store methods the tokens service uses (store.Store has them all): it reads API
// tokens, and writes them with their audit events in Update.
type Store interface {
	store.TokenReader
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Service authenticates bearer tokens and manages API tokens.
type Service struct {
	store      Store
	clock      clock.Clock
	ids        idgen.Generator
	adminToken string
	validID    func(string) bool
	cache      authCache
	federated  Federated
}

// Federated authenticates the JWTs of registered identity providers (oidcauth.Verifier).
type Federated interface {
	Authenticate(ctx context.Context, raw string) (auth.SecurityContext, error)
}

// WithFederated makes s accept JWTs through f beside Lark's own tokens, and returns s. A bearer
// credential shaped like a JWT goes to f only; anything else is looked up as a Lark token.
func (s *Service) WithFederated(f Federated) *Service {
	s.federated = f
	return s
}

// AuthCacheTTL bounds how long a successful token lookup is reused. Revocations through this process
// take effect at once (the entry is dropped); on other processes sharing the database, within the TTL.
const AuthCacheTTL = time.Second

type authCache struct {
	mu sync.RWMutex
	m  map[string]authEntry // by token hash
}

type authEntry struct {
	sc      auth.SecurityContext
	expires *time.Time
	fetched time.Time
}

func (c *authCache) get(hash string, now time.Time) (auth.SecurityContext, bool) {
	c.mu.RLock()
	e, ok := c.m[hash]
	c.mu.RUnlock()
	if !ok || now.Sub(e.fetched) >= AuthCacheTTL || now.Before(e.fetched) || (e.expires != nil && !now.Before(*e.expires)) {
		return auth.SecurityContext{}, false
	}
	return e.sc, true
}

func (c *authCache) put(hash string, e authEntry) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= 10000 {
		c.m = map[string]authEntry{}
	}
	c.m[hash] = e
	c.mu.Unlock()
}

func (c *authCache) dropToken(id string) {
	c.mu.Lock()
	for h, e := range c.m {
		if e.sc.TokenID == id {
			delete(c.m, h)
		}
	}
	c.mu.Unlock()
}

// NewService returns a Service. adminToken is the platform operator's secret (LARK_ADMIN_TOKEN);
// empty disables operator access. validTenant checks tenant ids for new tokens.
func NewService(s Store, c clock.Clock, ids idgen.Generator, adminToken string, validTenant func(string) bool) *Service {
	return &Service{store: s, clock: c, ids: ids, adminToken: adminToken, validID: validTenant}
}

// OperatorSubject is the subject id of the platform operator.
const OperatorSubject = "operator"

// Authenticate resolves a bearer secret to an auth.SecurityContext, or a 401 problem.
func (s *Service) Authenticate(ctx context.Context, secret string) (auth.SecurityContext, error) {
	if secret == "" {
		return auth.SecurityContext{}, problem.Unauthorized("missing bearer token")
	}
	if s.adminToken != "" && auth.Equal(secret, s.adminToken) {
		return auth.SecurityContext{SubjectID: OperatorSubject, Operator: true, Roles: []auth.Role{auth.RoleAdmin}}, nil
	}
	if s.federated != nil && auth.LooksLikeJWT(secret) {
		return s.federated.Authenticate(ctx, secret)
	}
	hash := auth.Hash(secret)
	now := s.clock.Now()
	if sc, ok := s.cache.get(hash, now); ok {
		return sc, nil
	}
	tk, err := s.store.TokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return auth.SecurityContext{}, problem.Unauthorized("invalid bearer token")
	}
	if err != nil {
		return auth.SecurityContext{}, problem.Internal(err)
	}
	if !tk.Active(now) {
		return auth.SecurityContext{}, problem.Unauthorized("token revoked or expired")
	}
	sc := auth.SecurityContext{TenantID: tk.TenantID, SubjectID: tk.SubjectID, Roles: tk.Roles, TokenID: tk.ID}
	s.cache.put(hash, authEntry{sc: sc, expires: tk.ExpiresAt, fetched: now})
	return sc, nil
}

// CreateTokenRequest is the body of POST /tokens.
type CreateTokenRequest struct {
	TenantID    string      `json:"tenant_id"`
	SubjectID   string      `json:"subject_id"`
	Roles       []auth.Role `json:"roles"`
	Description string      `json:"description,omitempty"`
	ExpiresAt   *time.Time  `json:"expires_at,omitempty"`
}

// CreatedToken is a new token with its secret, shown once.
type CreatedToken struct {
	auth.Token
	Secret string `json:"token"`
}

// CreateToken issues a token. The operator may issue for any tenant; a tenant admin only for its own
// tenant (tenant_id may then be omitted).
func (s *Service) CreateToken(ctx context.Context, sc auth.SecurityContext, req CreateTokenRequest) (CreatedToken, error) {
	if !sc.Operator {
		if req.TenantID == "" {
			req.TenantID = sc.TenantID
		}
		if req.TenantID != sc.TenantID {
			return CreatedToken{}, problem.Forbidden("tenant admins issue tokens for their own tenant only")
		}
	}
	var issues []problem.Issue
	if !s.validID(req.TenantID) {
		issues = append(issues, problem.Issue{Path: "$.tenant_id", Code: "INVALID_VALUE", Message: "tenant_id must be 1-63 characters of [a-z0-9_-], starting with a letter or digit, and not 'platform'"})
	}
	if req.SubjectID == "" || len(req.SubjectID) > 200 {
		issues = append(issues, problem.Issue{Path: "$.subject_id", Code: "INVALID_VALUE", Message: "subject_id is required (at most 200 characters)"})
	}
	if len(req.Roles) == 0 {
		issues = append(issues, problem.Issue{Path: "$.roles", Code: "INVALID_VALUE", Message: "at least one role is required: viewer, operator, developer or admin"})
	}
	for i, r := range req.Roles {
		if !r.Valid() {
			issues = append(issues, problem.Issue{Path: fmt.Sprintf("$.roles[%d]", i), Code: "INVALID_VALUE", Message: fmt.Sprintf("unknown role %q (viewer, operator, developer, admin)", r)})
		}
	}
	now := s.clock.Now()
	if req.ExpiresAt != nil && !req.ExpiresAt.After(now) {
		issues = append(issues, problem.Issue{Path: "$.expires_at", Code: "INVALID_VALUE", Message: "expires_at must be in the future"})
	}
	if len(issues) > 0 {
		return CreatedToken{}, problem.Validation("invalid token request", issues)
	}
	secret, hash, err := auth.NewSecret()
	if err != nil {
		return CreatedToken{}, problem.Internal(err)
	}
	tk := auth.Token{ID: s.ids.New("tok"), TenantID: req.TenantID, SubjectID: req.SubjectID, Roles: req.Roles,
		Description: req.Description, Hash: hash, CreatedAt: now, CreatedBy: sc.SubjectID}
	if req.ExpiresAt != nil {
		e := req.ExpiresAt.UTC().Truncate(time.Microsecond)
		tk.ExpiresAt = &e
	}
	ev, err := audit.WithDetails(audit.Event{ID: s.ids.New("aud"), TenantID: tk.TenantID, Type: audit.TokenCreated,
		ActorID: sc.SubjectID, ResourceType: "token", ResourceID: tk.ID, CorrelationID: obs.CorrelationID(ctx), At: now},
		map[string]any{"subject_id": tk.SubjectID, "roles": tk.Roles})
	if err == nil {
		err = s.store.Update(ctx, func(tx store.Tx) error {
			if err := tx.InsertToken(tk); err != nil {
				return err
			}
			return tx.InsertAudit(ev)
		})
	}
	if err != nil {
		return CreatedToken{}, problem.Internal(err)
	}
	return CreatedToken{Token: tk, Secret: secret}, nil
}

// ListTokens lists tokens (never their secrets): the operator sees every tenant's, an admin its own.
func (s *Service) ListTokens(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[auth.Token], error) {
	tenantID := sc.TenantID
	if sc.Operator {
		tenantID = ""
	}
	return s.store.ListTokens(ctx, tenantID, q)
}

// RevokeToken revokes a token; another tenant's token answers 404.
func (s *Service) RevokeToken(ctx context.Context, sc auth.SecurityContext, id string) error {
	scope := sc.TenantID
	if sc.Operator {
		scope = ""
	}
	now := s.clock.Now()
	err := s.store.Update(ctx, func(tx store.Tx) error {
		tk, err := tx.Token(scope, id)
		if err != nil {
			return err
		}
		if err := tx.RevokeToken(scope, id, now); err != nil {
			return err
		}
		return tx.InsertAudit(audit.Event{ID: s.ids.New("aud"), TenantID: tk.TenantID, Type: audit.TokenRevoked,
			ActorID: sc.SubjectID, ResourceType: "token", ResourceID: id, CorrelationID: obs.CorrelationID(ctx), At: now})
	})
	if errors.Is(err, store.ErrNotFound) {
		return problem.NotFound("token %s not found", id)
	}
	if err != nil {
		return problem.Internal(err)
	}
	s.cache.dropToken(id)
	return nil
}
