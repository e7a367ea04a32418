package api

import "testing"

// TestRouteTemplate: the route label of metrics, spans and access log lines is the chi pattern
// without its parameters' regular expressions.
func TestRouteTemplate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/api/serverless-runtime/v1/invocations/{id:[^:/]+}":          "/api/serverless-runtime/v1/invocations/{id}",
		"/api/serverless-runtime/v1/entrypoints/{id:[^:/]+}:validate": "/api/serverless-runtime/v1/entrypoints/{id}:validate",
		"/api/serverless-runtime/v1/invocations/{id:[^:/]+}/timeline": "/api/serverless-runtime/v1/invocations/{id}/timeline",
		"/a/{x:[0-9]{3}}/b/{y}":                  "/a/{x}/b/{y}",
		"/a/{x:[^/]+}/{y:[a-z]+}:go":             "/a/{x}/{y}:go",
		"/api/serverless-runtime/v1/entrypoints": "/api/serverless-runtime/v1/entrypoints",
		"/webhooks/{tenant}/{id}":                "/webhooks/{tenant}/{id}",
		"/healthz":                               "/healthz",
		"/api/serverless-runtime/v1/*":           "/api/serverless-runtime/v1/*",
	} {
		if got := routeTemplate(in); got != want {
			t.Errorf("routeTemplate(%q) = %q, want %q", in, got, want)
		}
	}
}
