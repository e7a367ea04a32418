package oidctest

import (
	"crypto/rand"
	"net/http"
	"sync/atomic"
	"time"
)

// deviceGrant is the issuer's OAuth side: the device authorization grant (RFC 8628) and the
// refresh token grant, for one user who approves every sign-in.
type deviceGrant struct {
	sub     string
	extra   map[string]any
	pending int           // authorization_pending answers before a device code is approved
	ttl     time.Duration // lifetime of the ID and access tokens
	codes   map[string]*deviceCode
	refresh map[string]string // refresh token → client ID

	// deviceHits counts device authorization requests, tokenHits token requests with the
	// device_code grant, and refreshHits those with the refresh_token grant.
	deviceHits, tokenHits, refreshHits atomic.Int64
}

type deviceCode struct {
	clientID string
	pending  int
}

// deviceGrantType is the grant_type of a device access token request.
const deviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

func (i *Issuer) routeDevice(mux *http.ServeMux) {
	i.dev = deviceGrant{sub: "device-user", pending: 1, ttl: time.Hour, codes: map[string]*deviceCode{}, refresh: map[string]string{}}
	mux.HandleFunc("POST /device", i.deviceAuthorization)
	mux.HandleFunc("POST /token", i.token)
}

// SetDeviceUser sets who approves device sign-ins: the subject and extra claims of the ID tokens
// the device and refresh grants issue (their audience is the requesting client ID).
func (i *Issuer) SetDeviceUser(sub string, extra map[string]any) {
	i.mu.Lock()
	i.dev.sub, i.dev.extra = sub, extra
	i.mu.Unlock()
}

// SetPendingPolls sets how many token polls of a device code answer authorization_pending before
// it is approved (default 1).
func (i *Issuer) SetPendingPolls(n int) {
	i.mu.Lock()
	i.dev.pending = n
	i.mu.Unlock()
}

// SetTokenTTL sets the lifetime of the tokens the device and refresh grants issue (default an
// hour; a negative one issues tokens already expired).
func (i *Issuer) SetTokenTTL(d time.Duration) {
	i.mu.Lock()
	i.dev.ttl = d
	i.mu.Unlock()
}

// DeviceTokenRequests counts token requests with the device_code grant.
func (i *Issuer) DeviceTokenRequests() int64 { return i.dev.tokenHits.Load() }

// RefreshRequests counts token requests with the refresh_token grant.
func (i *Issuer) RefreshRequests() int64 { return i.dev.refreshHits.Load() }

func (i *Issuer) deviceAuthorization(w http.ResponseWriter, r *http.Request) {
	i.dev.deviceHits.Add(1)
	clientID := r.PostFormValue("client_id")
	if clientID == "" {
		oauthError(w, "invalid_client")
		return
	}
	code := rand.Text()
	i.mu.Lock()
	i.dev.codes[code] = &deviceCode{clientID: clientID, pending: i.dev.pending}
	i.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	write(w, map[string]any{"device_code": code, "user_code": "WDJB-MJHT", "verification_uri": i.URL + "/activate",
		"verification_uri_complete": i.URL + "/activate?user_code=WDJB-MJHT", "expires_in": 60, "interval": 1})
}

func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, "invalid_request")
		return
	}
	var clientID, errCode string
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		i.codeToken(w, r) // authcode.go
		return
	case deviceGrantType:
		i.dev.tokenHits.Add(1)
		clientID, errCode = i.redeemDeviceCode(r.PostForm.Get("device_code"))
	case "refresh_token":
		i.dev.refreshHits.Add(1)
		clientID, errCode = i.redeemRefreshToken(r.PostForm.Get("refresh_token"))
	default:
		errCode = "unsupported_grant_type"
	}
	if errCode != "" {
		oauthError(w, errCode)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	write(w, i.issueTokens(clientID))
}

// redeemDeviceCode returns the client of an approved device code, or the OAuth error code.
func (i *Issuer) redeemDeviceCode(code string) (clientID, errCode string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	dc, ok := i.dev.codes[code]
	switch {
	case !ok:
		return "", "invalid_grant"
	case dc.pending > 0:
		dc.pending--
		return "", "authorization_pending"
	}
	delete(i.dev.codes, code)
	return dc.clientID, ""
}

// redeemRefreshToken returns the client of a refresh token and retires it (tokens rotate).
func (i *Issuer) redeemRefreshToken(tok string) (clientID, errCode string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	clientID, ok := i.dev.refresh[tok]
	if !ok {
		return "", "invalid_grant"
	}
	delete(i.dev.refresh, tok)
	return clientID, ""
}

// issueTokens makes an ID token for the device user with the client as audience, an access token
// and a new refresh token.
func (i *Issuer) issueTokens(clientID string) map[string]any {
	refresh := rand.Text()
	i.mu.Lock()
	sub, extra, ttl := i.dev.sub, i.dev.extra, i.dev.ttl
	i.dev.refresh[refresh] = clientID
	i.mu.Unlock()
	claims := i.Claims(sub, clientID, extra)
	claims["exp"] = time.Now().Add(ttl).Unix()
	return map[string]any{"access_token": rand.Text(), "token_type": "Bearer", "expires_in": int(ttl.Seconds()),
		"refresh_token": refresh, "id_token": i.Sign(claims)}
}

// oauthError answers an OAuth 2.0 error (RFC 6749 section 5.2).
func oauthError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	write(w, map[string]string{"error": code})
}
