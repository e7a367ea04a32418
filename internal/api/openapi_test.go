package api_test

// The API suite runs every request through the OpenAPI document's checker (internal/api/apispec):
// a response that the document does not describe (body, status) or a successful request it does
// not allow fails the test that made it. TestMain then checks that the suite exercised every
// operation of the document, and TestOpenAPIRoutes that the document has every route of the router.

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/api/apispec"
	"github.com/larkrun/lark/internal/workerhub"
	"github.com/larkrun/lark/internal/workerproto"
)

// exercised counts, across the package's tests, the document's operations the suite made.
var exercised = struct {
	sync.Mutex
	ops map[string]int
}{ops: map[string]int{}}

// newChecker returns a checker whose findings fail t when it ends (after the server it wraps has
// stopped: register it before the server's cleanup).
func newChecker(t testing.TB) *apispec.Checker {
	t.Helper()
	spec, err := apispec.Load()
	require.NoError(t, err)
	c := apispec.NewChecker(spec)
	t.Cleanup(func() {
		for _, e := range c.Errors() {
			t.Errorf("OpenAPI drift: %s", e)
		}
		exercised.Lock()
		defer exercised.Unlock()
		for op, n := range c.Seen() {
			exercised.ops[op] += n
		}
	})
	return c
}

// checked wraps h with a new checker (newChecker).
func checked(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	return newChecker(t).Wrap(h)
}

// probesUnknownRoutes lets the test's requests to routes the API does not have pass the checker
// when they are answered 404 or 405.
func (e *env) probesUnknownRoutes() {
	if e.spec != nil {
		e.spec.AllowUnknownRoutes()
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	// The coverage check needs the whole suite: skip it when tests were picked or some failed.
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" && !testing.Short() {
		if missing := unexercised(); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: the suite never exercised these operations of the OpenAPI document:\n  %s\n",
				strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}

// unexercised returns the document's operations no test made.
func unexercised() []string {
	spec, err := apispec.Load()
	if err != nil {
		return []string{err.Error()}
	}
	exercised.Lock()
	defer exercised.Unlock()
	var missing []string
	for _, op := range spec.Operations() {
		if exercised.ops[op] == 0 {
			missing = append(missing, op)
		}
	}
	return missing
}

// TestOpenAPIRoutes: every route of the router (chi.Walk) is an operation of the document, and
// every operation a route.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	ks, err := workerproto.ParseKeys([]string{"k:0123456789abcdef"})
	require.NoError(t, err)
	h := api.New(api.Config{Metrics: http.NotFoundHandler(), WorkerHub: workerhub.New(workerhub.Config{}), WorkerKeys: ks}).Handler()
	mux, ok := h.(chi.Routes)
	require.True(t, ok, "Handler() is a %T, not a chi router", h)
	var served []string
	require.NoError(t, chi.Walk(mux, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, routeKey(method, route))
		return nil
	}))
	spec, err := apispec.Load()
	require.NoError(t, err)
	var documented []string
	for _, op := range spec.Operations() {
		method, path, _ := strings.Cut(op, " ")
		documented = append(documented, routeKey(method, path))
	}
	var missing, extra []string
	for _, r := range served {
		if !slices.Contains(documented, r) {
			missing = append(missing, r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			extra = append(extra, d)
		}
	}
	require.Empty(t, missing, "routes the router serves but the OpenAPI document lacks")
	require.Empty(t, extra, "operations of the OpenAPI document the router does not serve")
}

// TestOpenAPIDocumentServed: the document is public JSON at the base path.
func TestOpenAPIDocumentServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.expect(t, http.StatusOK, http.MethodGet, base+"/openapi.json", "", nil)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.Equal(t, "3.1.0", r.Body["openapi"])
	paths, _ := r.Body["paths"].(obj)
	require.Contains(t, paths, base+"/entrypoints/{id}:validate")
}
