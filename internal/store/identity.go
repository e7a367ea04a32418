package store

import (
	"context"

	"github.com/larkrun/lark/internal/identity"
)

// IdentityProviderReader reads the identity providers (OIDC issuers) that authenticate callers.
type IdentityProviderReader interface {
	// IdentityProviderByIssuer finds the provider registered for an issuer URL (authentication).
	IdentityProviderByIssuer(ctx context.Context, issuer string) (identity.Provider, error)
	// IdentityProvider reads one provider by id; tenantID "" reads any (operator), otherwise only
	// that tenant's own issuers.
	IdentityProvider(ctx context.Context, tenantID, id string) (identity.Provider, error)
	// ListIdentityProviders lists providers; tenantID "" lists all (operator), otherwise that
	// tenant's own. Filters: tenant_id, issuer; order: tenant_id, issuer, created_at.
	ListIdentityProviders(ctx context.Context, tenantID string, q ListQuery) (Page[identity.Provider], error)
}

// IdentityProviderTx registers and removes identity providers.
type IdentityProviderTx interface {
	// InsertIdentityProvider stores a provider; ErrConflict when its issuer is registered already.
	InsertIdentityProvider(p identity.Provider) error
	// DeleteIdentityProvider removes a provider and returns it; tenantID "" deletes any (operator),
	// otherwise ErrNotFound unless the tenant owns it.
	DeleteIdentityProvider(tenantID, id string) (identity.Provider, error)
}
