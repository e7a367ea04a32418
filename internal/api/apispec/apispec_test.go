package apispec_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/larkrun/lark/internal/api/apispec"
)

const tiny = `{
  "openapi": "3.1.0",
  "info": {"title": "t", "version": "1"},
  "paths": {
    "/things/{id}:touch": {"post": {"parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
      "type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}}}}}}},
    "/things/{id}": {"get": {"parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
      "type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}}}}}}}
  }
}`

func serve(t *testing.T, c *apispec.Checker, status int, body string, method, path string) {
	t.Helper()
	h := c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if _, err := w.Write([]byte(body)); err != nil {
			t.Error(err)
		}
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
}

func TestChecker(t *testing.T) {
	spec, err := apispec.Parse([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string // substring of the one finding; "" none
	}{
		{"matches", http.MethodGet, "/things/a", `{"id":"a"}`, 200, ""},
		{"colon verb", http.MethodPost, "/things/a:touch", `{"id":"a"}`, 200, ""},
		{"wrong body", http.MethodGet, "/things/a", `{"id":1}`, 200, "does not match"},
		{"undocumented status", http.MethodGet, "/things/a", `{}`, 418, "status 418 is not in the document"},
		{"unknown path", http.MethodGet, "/nothing", `{}`, 404, "path not in the document"},
		{"unknown method", http.MethodDelete, "/things/a", `{}`, 405, "method not in the document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := apispec.NewChecker(spec)
			serve(t, c, tc.status, tc.body, tc.method, tc.path)
			errs := c.Errors()
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected findings: %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0], tc.want) {
				t.Fatalf("want one finding with %q, got %v", tc.want, errs)
			}
		})
	}
	c := apispec.NewChecker(spec).AllowUnknownRoutes()
	serve(t, c, 404, `{}`, http.MethodGet, "/nothing")
	if errs := c.Errors(); len(errs) > 0 {
		t.Fatalf("a probe answered 404 is allowed: %v", errs)
	}
}

// TestEmbeddedDocumentLoads loads Lark's own document as OpenAPI 3.1.
func TestEmbeddedDocumentLoads(t *testing.T) {
	spec, err := apispec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Operations()) < 90 {
		t.Fatalf("only %d operations", len(spec.Operations()))
	}
}
