package console

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
)

// Options configure the console.
type Options struct {
	// OIDC, when set, offers "Sign in with <issuer>" on the login page: the authorization code
	// flow with PKCE, run in the browser as a public client (docs/console.md).
	OIDC *OIDC
}

// OIDC names the issuer the console signs in with and the console's client id there. Both are
// public: they are served to the browser at ConfigPath. The issuer should be a registered identity
// provider whose audiences include ClientID, or the tokens it issues are refused by the API.
type OIDC struct {
	Issuer   string
	ClientID string
}

// publicConfig is the JSON served at ConfigPath.
type publicConfig struct {
	OIDC *publicOIDC `json:"oidc,omitempty"`
}

type publicOIDC struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"client_id"`
}

// public validates o and answers the Content-Security-Policy (which lets the page reach the
// issuer's origin, for its discovery document and token endpoint) and the public configuration.
func (o Options) public() (string, []byte, error) {
	cfg, csp := publicConfig{}, CSP
	if o.OIDC != nil {
		origin, err := issuerOrigin(o.OIDC.Issuer)
		if err != nil {
			return "", nil, err
		}
		id := o.OIDC.ClientID
		if id == "" || len(id) > 200 || strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) || r == ' ' }) {
			return "", nil, fmt.Errorf("console OIDC client id %q: want 1 to 200 printable characters without spaces", id)
		}
		cfg.OIDC = &publicOIDC{Issuer: o.OIDC.Issuer, ClientID: id}
		csp = strings.Replace(CSP, "connect-src 'self'", "connect-src 'self' "+origin, 1)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("console configuration: %w", err)
	}
	return csp, append(b, '\n'), nil
}

// issuerOrigin checks an issuer identifier (an https URL without query or fragment; http only on
// a loopback host, for development) and answers its origin.
func issuerOrigin(issuer string) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil || !u.IsAbs() || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("console OIDC issuer %q: want an absolute https URL without query, fragment or user", issuer)
	}
	ip := net.ParseIP(u.Hostname())
	loopback := u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())
	if u.Scheme != "https" && (u.Scheme != "http" || !loopback) {
		return "", fmt.Errorf("console OIDC issuer %q: want https (http only on a loopback host)", issuer)
	}
	return u.Scheme + "://" + u.Host, nil
}
