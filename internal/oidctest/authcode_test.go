package oidctest_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/oidctest"
)

// TestAuthCodePKCE: /auth redirects back with a code and the state; the code is exchanged once,
// only with the verifier whose S256 hash is the challenge, for tokens whose audience is the client.
func TestAuthCodePKCE(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	iss.AutoApprove("console", "alice", map[string]any{"tenant": "acme"})
	c := iss.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	verifier := "a-verifier-of-enough-length-for-pkce-0123456789"
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {"console"}, "redirect_uri": {"http://127.0.0.1:1/cb"},
		"state": {"s1"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	res, err := c.Get(iss.URL + "/auth?" + q.Encode())
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	loc, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "s1", loc.Query().Get("state"))
	code := loc.Query().Get("code")
	require.NotEmpty(t, code)

	exchange := func(verifier string) (int, map[string]any) {
		res, err := c.PostForm(iss.URL+"/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"client_id": {"console"}, "redirect_uri": {"http://127.0.0.1:1/cb"}, "code_verifier": {verifier}})
		require.NoError(t, err)
		defer res.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
		return res.StatusCode, body
	}
	status, body := exchange("the-wrong-verifier-of-enough-length-0123456789")
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "invalid_grant", body["error"])
	// The failed attempt used the code up.
	status, _ = exchange(verifier)
	require.Equal(t, http.StatusBadRequest, status)
	require.Zero(t, iss.CodeExchanges())

	res, err = c.Get(iss.URL + "/auth?" + q.Encode())
	require.NoError(t, err)
	res.Body.Close()
	loc, err = url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	code = loc.Query().Get("code")
	status, body = exchange(verifier)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.NotEmpty(t, body["id_token"])
	require.Equal(t, 1, iss.CodeExchanges())
	status, _ = exchange(verifier)
	require.Equal(t, http.StatusBadRequest, status, "a code is exchanged once")

	q.Del("code_challenge_method")
	res, err = c.Get(iss.URL + "/auth?" + q.Encode())
	require.NoError(t, err)
	res.Body.Close()
	loc, err = url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "invalid_request", loc.Query().Get("error"), "plain PKCE is refused")
}
