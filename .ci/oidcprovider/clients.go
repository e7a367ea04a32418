package main

import (
	"context"
	"errors"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client is a public client (no secret; PKCE for the code flow).
type client struct {
	id           string
	grants       []oidc.GrantType
	redirectURIs []string
}

// clients are the provider's clients by id.
var clients = map[string]*client{
	// lark login --oidc ISSUER --client-id lark-cli
	"lark-cli": {id: "lark-cli", grants: []oidc.GrantType{oidc.GrantTypeDeviceCode, oidc.GrantTypeRefreshToken}},
	// the console, any loopback port (RFC 8252 §7.3 for native clients)
	"lark-console": {id: "lark-console", grants: []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken},
		redirectURIs: []string{"http://127.0.0.1/console/oidc/callback", "http://localhost/console/oidc/callback"}},
	// a client Lark is not registered for: its tokens' audience is wrong for Lark
	"other-app": {id: "other-app", grants: []oidc.GrantType{oidc.GrantTypeDeviceCode}},
}

// placeholderClients lets the example storage's device-flow bookkeeping find the client ids
// (it looks them up in its own map); GetClientByClientID answers the real ones.
func placeholderClients() map[string]*storage.Client {
	m := map[string]*storage.Client{}
	for id := range clients {
		m[id] = storage.DeviceClient(id, "")
	}
	return m
}

// GetClientByClientID answers this provider's clients.
func (s *store) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if c, ok := clients[id]; ok {
		return c, nil
	}
	return nil, errors.New("client not found")
}

// AuthorizeClientIDSecret: the clients are public; only their ids are checked.
func (s *store) AuthorizeClientIDSecret(_ context.Context, id, _ string) error {
	if _, ok := clients[id]; !ok {
		return errors.New("client not found")
	}
	return nil
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirectURIs }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType         { return c.grants }
func (c *client) LoginURL(id string) string            { return "/login/username?authRequestID=" + id }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *client) DevMode() bool                        { return false }
func (c *client) IsScopeAllowed(string) bool           { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }

func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
