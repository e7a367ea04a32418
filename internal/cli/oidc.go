package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/larkrun/lark/pkg/larkclient"
)

// refreshMargin is how long before its expiry a stored OIDC token is refreshed.
const refreshMargin = time.Minute

// refreshTimeout bounds one refresh against the issuer's token endpoint.
const refreshTimeout = 30 * time.Second

// oidcLogin holds the flags of `lark login --oidc`.
type oidcLogin struct {
	issuer, clientID string
	scopes           []string
}

// oidcContext makes go-oidc and oauth2 use the CLI's HTTP client for the issuer (tests set one
// that trusts their issuer's certificate; nil is http.DefaultClient).
func (g *globals) oidcContext(ctx context.Context) context.Context {
	if g.httpClient == nil {
		return ctx
	}
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, g.httpClient), g.httpClient)
}

// loginOIDC signs in with the device authorization grant (RFC 8628): it prints the user code and
// verification URI, polls the token endpoint until the user approves, checks the token against
// the server and saves it, with its refresh token, in the profile.
func (g *globals) loginOIDC(ctx context.Context, o oidcLogin, server, name string) error {
	if server == "" {
		return usageErr("lark login --oidc needs --server (or LARK_SERVER)")
	}
	ctx = g.oidcContext(ctx)
	provider, err := oidc.NewProvider(ctx, o.issuer)
	if err != nil {
		return &exitError{code: ExitAPI, err: fmt.Errorf("discovering the OIDC issuer %s: %w", o.issuer, err)}
	}
	ep := provider.Endpoint()
	if ep.DeviceAuthURL == "" {
		return failed("the OIDC issuer %s has no device_authorization_endpoint: it does not offer the device grant", o.issuer)
	}
	conf := &oauth2.Config{ClientID: o.clientID, Endpoint: ep, Scopes: o.scopes}
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		return &exitError{code: ExitAPI, err: fmt.Errorf("starting the device sign-in at %s: %w", ep.DeviceAuthURL, err)}
	}
	fmt.Fprintf(g.errOut, "To sign in, open %s and enter the code %s\n", da.VerificationURI, da.UserCode)
	if da.VerificationURIComplete != "" {
		fmt.Fprintf(g.errOut, "(or open %s)\n", da.VerificationURIComplete)
	}
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		return &exitError{code: ExitAPI, err: fmt.Errorf("waiting for the device sign-in: %w", err)}
	}
	bearer, exp := bearerOf(tok)
	if err := checkToken(ctx, server, bearer); err != nil {
		return err
	}
	p := Profile{Server: server, Token: bearer, Issuer: o.issuer, ClientID: o.clientID, TokenURL: ep.TokenURL,
		RefreshToken: tok.RefreshToken, Expiry: exp}
	return g.saveProfile(name, p, "signed in with "+o.issuer)
}

// checkToken proves the server and the token with one cheap authenticated read.
func checkToken(ctx context.Context, server, token string) error {
	cl, err := larkclient.New(server, token, larkclient.WithUserAgent("lark-cli"))
	if err != nil {
		return usageErr("%v", err)
	}
	if _, err := cl.ListEntrypoints(ctx, larkclientLimit1, false); err != nil {
		return fmt.Errorf("checking the token against %s: %w", server, err)
	}
	return nil
}

// saveProfile stores p under name, makes it the current profile and says so.
func (g *globals) saveProfile(name string, p Profile, how string) error {
	cfg, path, err := loadConfig()
	if err != nil {
		return usageErr("%v", err)
	}
	cfg.Profiles[name] = p
	cfg.Current = name
	if err := saveConfig(path, cfg); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "Logged in to %s as profile %q, %s (saved in %s).\n", p.Server, name, how, path)
	return nil
}

// bearerOf picks the bearer of a token answer: the ID token when there is one (a JWT for the
// server's audience), else the access token; and when it expires.
func bearerOf(tok *oauth2.Token) (string, time.Time) {
	if id, ok := tok.Extra("id_token").(string); ok && id != "" {
		if exp, ok := jwtExpiry(id); ok {
			return id, exp
		}
		return id, tok.Expiry
	}
	return tok.AccessToken, tok.Expiry
}

// jwtExpiry reads the exp claim of a JWT without verifying it: only to know when to refresh (the
// server verifies the token).
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var c struct {
		Exp json.Number `json:"exp"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return time.Time{}, false
	}
	n, err := c.Exp.Int64()
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// refreshDue refreshes an OIDC profile's token when it has expired or expires within
// refreshMargin, saving the new tokens in the config file; other profiles come back unchanged.
func (g *globals) refreshDue(cfg Config, path, name string, p Profile) (Profile, error) {
	if p.RefreshToken == "" || p.TokenURL == "" || p.Expiry.IsZero() || g.now().Add(refreshMargin).Before(p.Expiry) {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(g.oidcContext(context.Background()), refreshTimeout)
	defer cancel()
	conf := &oauth2.Config{ClientID: p.ClientID, Endpoint: oauth2.Endpoint{TokenURL: p.TokenURL}}
	tok, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: p.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return p, &exitError{code: ExitAPI, err: fmt.Errorf("the OIDC token of profile %q expired and could not be refreshed "+
			"(sign in again: lark login --oidc %s): %w", name, p.Issuer, err)}
	}
	p.Token, p.Expiry = bearerOf(tok)
	if tok.RefreshToken != "" {
		p.RefreshToken = tok.RefreshToken
	}
	cfg.Profiles[name] = p
	if err := saveConfig(path, cfg); err != nil {
		return p, err
	}
	return p, nil
}
