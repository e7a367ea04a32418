package larkclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProblems: a problem document becomes a *Problem with its members; any other error answer
// still does, with the status and the start of the body; requests carry the token.
func TestProblems(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		switch r.URL.Path {
		case BasePath + "/entrypoints/missing":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, err := w.Write([]byte(`{"type":"gts://x","title":"Not Found","status":404,"detail":"entrypoint missing not found","trace_id":"corr_1"}`))
			require.NoError(t, err)
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, err := w.Write([]byte("<html>" + strings.Repeat("x", 500) + "</html>"))
			require.NoError(t, err)
		}
	}))
	defer ts.Close()
	c, err := New(ts.URL+"/", "tok", WithHTTPClient(ts.Client()))
	require.NoError(t, err)
	ctx := context.Background()

	_, err = c.GetEntrypoint(ctx, "missing", false)
	var p *Problem
	require.True(t, errors.As(err, &p))
	require.True(t, p.NotFound())
	require.Equal(t, "corr_1", p.TraceID)
	require.Equal(t, "entrypoint missing not found (404)", err.Error())

	_, err = c.GetInvocation(ctx, "inv_x")
	require.True(t, errors.As(err, &p))
	require.Equal(t, http.StatusBadGateway, p.Status)
	require.LessOrEqual(t, len(p.Detail), 210, "the detail is cut")

	_, err = c.GetInvocation(ctx, " ")
	require.ErrorIs(t, err, errEmptyID)

	_, err = New("ftp://x", "t")
	require.Error(t, err)
	c, err = New("http://127.0.0.1:1"+BasePath, "t")
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:1", c.BaseURL(), "a trailing base path is accepted")
	_, err = c.GetInvocation(ctx, "inv_x")
	require.Error(t, err)
	require.False(t, errors.As(err, &p), "a network error is not a problem")
}
