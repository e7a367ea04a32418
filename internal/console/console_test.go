package console

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// get sends method path (with Accept-Encoding when gzip) through Wrap around an API stand-in.
func get(t *testing.T, method, path string, gzip bool) *http.Response {
	t.Helper()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Api", "yes")
		w.WriteHeader(http.StatusTeapot)
	})
	h, err := Wrap(api)
	require.NoError(t, err)
	req := httptest.NewRequest(method, path, nil)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip, deflate")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

// TestIndexForEveryAppPath: /console, /console/ and any path below answer index.html, never
// cached, with the strict CSP and the assets' current version in it.
func TestIndexForEveryAppPath(t *testing.T) {
	h, err := New()
	require.NoError(t, err)
	for _, p := range []string{"/console", "/console/", "/console/invocations/inv_1", "/console/assets", "/console/assets?asset=sales.clean", "/console/no/such/page?x=1"} {
		res := get(t, http.MethodGet, p, false)
		require.Equal(t, 200, res.StatusCode, p)
		require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"), p)
		require.Equal(t, "no-cache", res.Header.Get("Cache-Control"), p)
		require.Equal(t, CSP, res.Header.Get("Content-Security-Policy"), p)
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"), p)
		require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"), p)
		b := body(t, res)
		require.Contains(t, b, `src="/console/assets/`+h.Version()+`/main.js"`, p)
		require.NotContains(t, b, versionPlaceholder, p)
	}
	require.Contains(t, CSP, "default-src 'self'")
	require.Contains(t, CSP, "script-src 'self';")
	require.NotContains(t, CSP, "unsafe-inline")
	require.NotContains(t, CSP, "unsafe-eval")
}

// TestAssets: a versioned asset is served with a year of immutable caching, gzip-compressed when
// the client accepts it; HEAD has no body; an asset of another version is a 404 problem that is
// not cached, never index.html.
func TestAssets(t *testing.T) {
	h, err := New()
	require.NoError(t, err)
	p := "/console/assets/" + h.Version() + "/main.js"
	res := get(t, http.MethodGet, p, false)
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "text/javascript; charset=utf-8", res.Header.Get("Content-Type"))
	require.Equal(t, "public, max-age=31536000, immutable", res.Header.Get("Cache-Control"))
	require.Equal(t, CSP, res.Header.Get("Content-Security-Policy"))
	plain := body(t, res)
	require.Contains(t, plain, "import ")

	res = get(t, http.MethodGet, p, true)
	require.Equal(t, "gzip", res.Header.Get("Content-Encoding"))
	require.Equal(t, "Accept-Encoding", res.Header.Get("Vary"))
	require.Less(t, len(body(t, res)), len(plain))

	res = get(t, http.MethodHead, "/console/assets/"+h.Version()+"/console.css", false)
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "text/css; charset=utf-8", res.Header.Get("Content-Type"))
	require.Empty(t, body(t, res))

	for _, bad := range []string{"/console/assets/0000000000000000/main.js", "/console/assets/" + h.Version() + "/nope.js",
		"/console/assets/" + h.Version() + "/index.html", "/console/assets/"} {
		res = get(t, http.MethodGet, bad, false)
		require.Equal(t, 404, res.StatusCode, bad)
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"), bad)
		require.Equal(t, "no-store", res.Header.Get("Cache-Control"), bad)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(body(t, res)), &doc), bad)
		require.EqualValues(t, 404, doc["status"], bad)
		require.Contains(t, doc["type"], "not_found", bad)
	}
}

// TestWrapRoutes: only /console and below are the console's; everything else reaches the API,
// and the console answers only GET and HEAD.
func TestWrapRoutes(t *testing.T) {
	for _, p := range []string{"/api/serverless-runtime/v1/whoami", "/healthz", "/consoles", "/console.js", "/"} {
		res := get(t, http.MethodGet, p, false)
		require.Equal(t, http.StatusTeapot, res.StatusCode, p)
		require.Equal(t, "yes", res.Header.Get("X-Api"), p)
	}
	res := get(t, http.MethodPost, "/console/login", false)
	require.Equal(t, 405, res.StatusCode)
	require.Equal(t, "GET, HEAD", res.Header.Get("Allow"))
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
}

// TestGzipNegotiation: gzip only when listed with a non-zero weight.
func TestGzipNegotiation(t *testing.T) {
	for header, want := range map[string]bool{"": false, "gzip": true, "br, gzip;q=0.5": true, "GZIP": true,
		"gzip;q=0": false, "gzip; q=0.0": false, "identity": false, "deflate, br": false} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Accept-Encoding", header)
		require.Equal(t, want, acceptsGzip(r), header)
	}
}

// TestAssetsSelfContained: the console works offline and under its CSP: no file refers to another
// origin (the SVG namespace is a name, not a fetch), index.html has no inline script, style or
// event handler, and no script writes HTML (innerHTML, outerHTML =, insertAdjacentHTML,
// document.write) or evaluates strings.
func TestAssetsSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(embedded, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(embedded, p)
		if err != nil {
			return err
		}
		src := strings.ReplaceAll(string(b), "'http://www.w3.org/2000/svg'", "")
		require.Empty(t, external.FindAllString(src, -1), "%s refers to another origin", p)
		if strings.HasSuffix(p, ".js") {
			for _, banned := range []string{"innerHTML", "outerHTML =", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
				require.NotContains(t, src, banned, p)
			}
		}
		return nil
	})
	require.NoError(t, err)
	index, err := fs.ReadFile(embedded, "assets/index.html")
	require.NoError(t, err)
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(string(index), -1) {
		require.Contains(t, tag, `src="/console/assets/`, "inline script: %s", tag)
	}
	require.NotRegexp(t, `<style|\sstyle=|\son[a-z]+=`, string(index))
}

// TestAssetBudget: index.html and every script and style, compressed as served, leave most of a
// page's 200 KB budget to its API answers (TestConsolePageWeight measures whole pages in a browser).
func TestAssetBudget(t *testing.T) {
	h, err := New()
	require.NoError(t, err)
	total := len(h.index.gzipped)
	for _, f := range h.assets {
		total += len(f.gzipped)
	}
	t.Logf("console assets: %d bytes compressed", total)
	require.Less(t, total, 100<<10)
}

// TestNewFromRejectsMissingIndex: a build without index.html fails loudly instead of serving nothing.
func TestNewFromRejectsMissingIndex(t *testing.T) {
	sub, err := fs.Sub(embedded, "assets")
	require.NoError(t, err)
	_, err = newFrom(sub) // no assets/ directory at its root
	require.Error(t, err)
}
