// Package federation manages the identity providers (OIDC issuers) whose JWTs authenticate callers
// beside Lark's own tokens: registration by the platform operator (platform issuers, and issuers
// for a tenant) or by a tenant admin whose policy allows it (the tenant's own issuer), reads,
// deletion, and the operator's configuration file. Every change is audited.
package federation

import (
	"context"
	"errors"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Store is the store methods the service uses (store.Store has them all).
type Store interface {
	store.IdentityProviderReader
	store.TenantReader
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Forgetter drops what an authenticator holds about an issuer (oidcauth.Verifier).
type Forgetter interface {
	Forget(issuer string)
}

// Service manages identity providers.
type Service struct {
	store  Store
	clock  clock.Clock
	ids    idgen.Generator
	forget Forgetter
}

// NewService returns a Service; forget (may be nil) is told about deleted issuers.
func NewService(s Store, c clock.Clock, ids idgen.Generator, forget Forgetter) *Service {
	return &Service{store: s, clock: c, ids: ids, forget: forget}
}

// CreateRequest is the body of POST /identity-providers: a provider without the server's fields.
type CreateRequest struct {
	TenantID         string               `json:"tenant_id,omitempty"`
	Issuer           string               `json:"issuer"`
	Audiences        []string             `json:"audiences"`
	Algorithms       []string             `json:"algorithms,omitempty"`
	ClockSkewSeconds int64                `json:"clock_skew_seconds,omitempty"`
	Claims           identity.Claims      `json:"claims"`
	RoleMapping      map[string]auth.Role `json:"role_mapping,omitempty"`
	OperatorGroups   []string             `json:"operator_groups,omitempty"`
	Description      string               `json:"description,omitempty"`
}

// Provider returns the provider the request describes, normalized.
func (r CreateRequest) Provider() identity.Provider {
	p := identity.Provider{TenantID: r.TenantID, Issuer: r.Issuer, Audiences: r.Audiences, Algorithms: r.Algorithms,
		ClockSkewSeconds: r.ClockSkewSeconds, Claims: r.Claims, RoleMapping: r.RoleMapping,
		OperatorGroups: r.OperatorGroups, Description: r.Description}
	p.Normalize()
	return p
}

// Create registers a provider. The operator registers platform issuers (no tenant_id) and issuers
// for a tenant; a tenant admin registers its own tenant's issuer when its policy allows it. The
// provider's RegisteredBy says which of the two did (only a tenant admin's follows the tenant's
// policy at verification, identity.Provider.FollowsTenantPolicy).
func (s *Service) Create(ctx context.Context, sc auth.SecurityContext, req CreateRequest) (identity.Provider, error) {
	if err := s.mayCreate(ctx, sc, &req); err != nil {
		return identity.Provider{}, err
	}
	p := req.Provider()
	issues := p.Validate()
	if p.TenantID != "" && !tenant.ValidID(p.TenantID) {
		issues = append(issues, problem.Issue{Path: "$.tenant_id", Code: "INVALID_VALUE", Message: "tenant_id is not a valid tenant id"})
	}
	if len(p.Description) > 500 {
		issues = append(issues, problem.Issue{Path: "$.description", Code: "INVALID_VALUE", Message: "description is at most 500 characters"})
	}
	if len(issues) > 0 {
		return identity.Provider{}, problem.Validation("invalid identity provider", issues)
	}
	p.ID, p.CreatedAt, p.CreatedBy = s.ids.New("idp"), s.clock.Now(), sc.SubjectID
	p.RegisteredBy = identity.RegisteredByTenantAdmin
	if sc.Operator {
		p.RegisteredBy = identity.RegisteredByOperator
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertIdentityProvider(p); err != nil {
			return err
		}
		return s.audit(ctx, tx, sc, audit.IdentityProviderCreated, p)
	})
	if errors.Is(err, store.ErrConflict) {
		return identity.Provider{}, problem.Conflict("issuer_registered", "the issuer %s is registered already", p.Issuer)
	}
	if err != nil {
		return identity.Provider{}, problem.Internal(err)
	}
	return p, nil
}

// mayCreate checks who may register the provider req describes, filling a tenant admin's tenant.
func (s *Service) mayCreate(ctx context.Context, sc auth.SecurityContext, req *CreateRequest) error {
	if sc.Operator {
		return nil
	}
	if !sc.Has(auth.RoleAdmin) {
		return problem.Forbidden("registering identity providers needs the admin role")
	}
	if req.TenantID == "" {
		req.TenantID = sc.TenantID
	}
	if req.TenantID != sc.TenantID {
		return problem.Forbidden("a tenant admin registers its own tenant's issuer only")
	}
	pol, err := s.store.Tenant(ctx, sc.TenantID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return problem.Internal(err)
	}
	if !pol.Policies.AllowTenantIdentityProviders {
		return problem.Forbidden("the tenant's policy does not allow it to register identity providers (policies.allow_tenant_identity_providers, set by the platform operator)")
	}
	return nil
}

func (s *Service) event(ctx context.Context, sc auth.SecurityContext, typ string, p identity.Provider) (audit.Event, error) {
	tenantID := p.TenantID
	if tenantID == "" {
		tenantID = entrypoint.PlatformTenant
	}
	return audit.WithDetails(audit.Event{ID: s.ids.New("aud"), TenantID: tenantID, Type: typ, ActorID: sc.SubjectID,
		ResourceType: "identity_provider", ResourceID: p.ID, CorrelationID: obs.CorrelationID(ctx), At: s.clock.Now()},
		map[string]any{"issuer": p.Issuer, "scope": p.Scope()})
}

func (s *Service) audit(ctx context.Context, tx store.Tx, sc auth.SecurityContext, typ string, p identity.Provider) error {
	ev, err := s.event(ctx, sc, typ, p)
	if err != nil {
		return err
	}
	return tx.InsertAudit(ev)
}

// scope is the tenant whose providers sc may see: "" for the operator (all).
func scope(sc auth.SecurityContext) (string, error) {
	if sc.Operator {
		return "", nil
	}
	if !sc.Has(auth.RoleAdmin) {
		return "", problem.Forbidden("identity providers need the admin role")
	}
	return sc.TenantID, nil
}

// List lists the providers sc may see: every one for the operator, its own tenant's for an admin.
func (s *Service) List(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[identity.Provider], error) {
	tenantID, err := scope(sc)
	if err != nil {
		return store.Page[identity.Provider]{}, err
	}
	return s.store.ListIdentityProviders(ctx, tenantID, q)
}

// Get reads one provider; one sc may not see answers 404.
func (s *Service) Get(ctx context.Context, sc auth.SecurityContext, id string) (identity.Provider, error) {
	tenantID, err := scope(sc)
	if err != nil {
		return identity.Provider{}, err
	}
	p, err := s.store.IdentityProvider(ctx, tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return p, problem.NotFound("identity provider %s not found", id)
	}
	if err != nil {
		return p, problem.Internal(err)
	}
	return p, nil
}

// Delete removes a provider: its tokens stop authenticating at once on this node, within the
// verifier's provider cache on the others. A tenant admin may delete its own issuer even after
// its policy stopped allowing new ones.
func (s *Service) Delete(ctx context.Context, sc auth.SecurityContext, id string) error {
	tenantID, err := scope(sc)
	if err != nil {
		return err
	}
	var gone identity.Provider
	err = s.store.Update(ctx, func(tx store.Tx) error {
		p, err := tx.DeleteIdentityProvider(tenantID, id)
		if err != nil {
			return err
		}
		if !sc.Operator && p.RegisteredBy == identity.RegisteredByOperator {
			return problem.Forbidden("identity provider %s was registered by the platform operator; only the operator deletes it", id)
		}
		gone = p
		return s.audit(ctx, tx, sc, audit.IdentityProviderDeleted, p)
	})
	if errors.Is(err, store.ErrNotFound) {
		return problem.NotFound("identity provider %s not found", id)
	}
	if pe := (*problem.Error)(nil); errors.As(err, &pe) {
		return err
	}
	if err != nil {
		return problem.Internal(err)
	}
	if s.forget != nil {
		s.forget.Forget(gone.Issuer)
	}
	return nil
}
