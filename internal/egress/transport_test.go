package egress_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/egress"
)

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransportCarriesRequests: with Options.Transport, requests go through it instead of the
// network, and the egress rules that do not depend on dialing still apply before it.
func TestTransportCarriesRequests(t *testing.T) {
	var seen []string
	c := egress.New(egress.Options{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r.Method+" "+r.URL.String()+" "+r.Header.Get("User-Agent"))
		return &http.Response{StatusCode: 201, Header: http.Header{"X-Up": []string{"yes"}},
			Body: io.NopCloser(strings.NewReader(`{"ok":true}`)), Request: r}, nil
	})})
	resp, err := c.Do(context.Background(), egress.Request{Method: http.MethodPost, URL: "https://api.example.com/x?q=1",
		Body: []byte(`{}`), AllowedDomains: []string{"api.example.com"}})
	require.NoError(t, err)
	require.Equal(t, 201, resp.StatusCode)
	require.Equal(t, "yes", resp.Headers["X-Up"])
	require.JSONEq(t, `{"ok":true}`, string(resp.Body))
	require.Equal(t, []string{"POST https://api.example.com/x?q=1 lark-egress/1"}, seen)

	_, err = c.Do(context.Background(), egress.Request{Method: http.MethodGet, URL: "https://other.example.com/",
		AllowedDomains: []string{"api.example.com"}})
	var ee *egress.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, egress.KindForbiddenDomain, ee.Kind)
	_, err = c.Do(context.Background(), egress.Request{Method: http.MethodGet, URL: "http://127.0.0.1/", AllowedDomains: []string{"*"}})
	require.ErrorAs(t, err, &ee)
	require.Equal(t, egress.KindForbiddenAddress, ee.Kind, "IP literals are still checked")
	require.Len(t, seen, 1, "refused requests never reach the transport")
}
