package oidctest

// The authorization code grant with PKCE (RFC 7636, S256 only) for public clients such as the
// console: /auth approves, without a page, the user AutoApprove configured and redirects back with
// a code; /token exchanges the code once, for the client and redirect URI it was issued to, when
// the code verifier hashes to the challenge. Both answer browsers of another origin (CORS).

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"time"
)

// codeTTL is how long an issued code can be exchanged.
const codeTTL = time.Minute

// authCodeState is the issuer's authorization code configuration and outstanding codes.
type authCodeState struct {
	clientID string
	subject  string
	claims   map[string]any
	codes    map[string]pendingCode
	// Exchanges counts successful code exchanges.
	exchanges int
}

// pendingCode is an issued, not yet exchanged code.
type pendingCode struct {
	clientID, redirectURI, challenge, nonce string
	expires                                 time.Time
}

// AutoApprove makes /auth approve every request of clientID as subject, whose ID and access
// tokens (audience clientID) carry claims as well (a tenant, groups).
func (i *Issuer) AutoApprove(clientID, subject string, claims map[string]any) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.authCode.clientID, i.authCode.subject, i.authCode.claims = clientID, subject, claims
}

// CodeExchanges answers how many codes were exchanged for tokens.
func (i *Issuer) CodeExchanges() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.authCode.exchanges
}

func (i *Issuer) routeAuthCode(mux *http.ServeMux) {
	mux.HandleFunc("GET /auth", i.authorize)
	mux.HandleFunc("OPTIONS /token", i.codeToken) // POST /token is device.go's, which hands this grant here
}

// authorize checks an authorization request and redirects to its redirect_uri with a code and the
// request's state. A request it cannot redirect (unknown client, bad redirect URI) answers 400.
func (i *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	i.mu.Lock()
	client := i.authCode.clientID
	i.mu.Unlock()
	if client == "" || q.Get("client_id") != client || err != nil || !redirect.IsAbs() || redirect.Fragment != "" {
		codeError(w, "invalid_request", "unknown client or bad redirect_uri")
		return
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	switch {
	case q.Get("response_type") != "code":
		back.Set("error", "unsupported_response_type")
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		back.Set("error", "invalid_request")
		back.Set("error_description", "PKCE with S256 is required")
	default:
		back.Set("code", i.issueCode(pendingCode{clientID: client, redirectURI: redirect.String(),
			challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), expires: time.Now().Add(codeTTL)}))
	}
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (i *Issuer) issueCode(p pendingCode) string {
	code := rand.Text()
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.authCode.codes == nil {
		i.authCode.codes = map[string]pendingCode{}
	}
	i.authCode.codes[code] = p
	return code
}

// codeToken exchanges a code (once) for an ID token and an access token (the authorization_code
// grant of the token endpoint, device.go token; and its CORS preflight).
func (i *Issuer) codeToken(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "POST")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "authorization_code" {
		codeError(w, "unsupported_grant_type", "only authorization_code is supported")
		return
	}
	f := r.PostForm
	i.mu.Lock()
	p, ok := i.authCode.codes[f.Get("code")]
	delete(i.authCode.codes, f.Get("code"))
	subject, extra := i.authCode.subject, i.authCode.claims
	i.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case !ok || time.Now().After(p.expires):
		codeError(w, "invalid_grant", "unknown, used or expired code")
	case f.Get("client_id") != p.clientID || f.Get("redirect_uri") != p.redirectURI:
		codeError(w, "invalid_grant", "the code was issued to another client or redirect_uri")
	case subtle.ConstantTimeCompare([]byte(b64(sum[:])), []byte(p.challenge)) != 1:
		codeError(w, "invalid_grant", "code_verifier does not match the code_challenge")
	default:
		claims := i.Claims(subject, p.clientID, extra)
		if p.nonce != "" {
			claims["nonce"] = p.nonce
		}
		tok := i.Sign(claims)
		i.mu.Lock()
		i.authCode.exchanges++
		i.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		write(w, map[string]any{"access_token": tok, "id_token": tok, "token_type": "Bearer", "expires_in": 3600})
	}
}

// codeError answers an OAuth 2.0 error (RFC 6749 section 5.2) with a description.
func codeError(w http.ResponseWriter, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	write(w, map[string]string{"error": code, "error_description": desc})
}
