package main

import (
	"context"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// member is a user's tenant and groups, the claims Lark maps (claims.tenant "tenant", claims.roles
// "groups"). A user's id is its username, which the example's device flow uses as the subject.
type member struct {
	tenant string
	groups []string
}

// members are the provider's users: every password is "<user>-password".
var members = map[string]member{
	"alice": {tenant: "acme", groups: []string{"lark-devs", "staff"}},
	"vic":   {tenant: "acme", groups: []string{"lark-viewers"}},
	"ada":   {tenant: "acme", groups: []string{"lark-admins"}},
	"eve":   {tenant: "globex", groups: []string{"lark-devs"}},
	"root":  {groups: []string{"platform-ops"}},
}

// userStore serves members to the example storage.
type userStore struct{}

func (userStore) GetUserByID(id string) *storage.User {
	if _, ok := members[id]; !ok {
		return nil
	}
	return &storage.User{ID: id, Username: id, Password: id + "-password", FirstName: id, LastName: "CI",
		Email: id + "@example.test", EmailVerified: true, PreferredLanguage: language.English}
}

func (u userStore) GetUserByUsername(name string) *storage.User { return u.GetUserByID(name) }

// ExampleClientID names the example's JWT-profile service user (unused here).
func (userStore) ExampleClientID() string { return storage.ServiceUserID }

// claims are the tenant and group claims of a user (none for an unknown one).
func claims(userID string) map[string]any {
	m, ok := members[userID]
	if !ok {
		return nil
	}
	c := map[string]any{"groups": m.groups}
	if m.tenant != "" {
		c["tenant"] = m.tenant
	}
	return c
}

// SetUserinfoFromRequest adds the tenant and groups to an ID token's claims.
func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	for k, v := range claims(req.GetSubject()) {
		info.AppendClaims(k, v)
	}
	return nil
}

// SetUserinfoFromToken adds them to the userinfo endpoint's answer.
func (s *store) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	for k, v := range claims(subject) {
		info.AppendClaims(k, v)
	}
	return nil
}

// GetPrivateClaimsFromScopes adds them to JWT access tokens.
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	c, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	for k, v := range claims(userID) {
		if c == nil {
			c = map[string]any{}
		}
		c[k] = v
	}
	return c, nil
}
