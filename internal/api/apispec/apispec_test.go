package apispec_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/larkrun/lark/internal/api/apispec"
)

const tiny = `{
  "openapi": "3.1.0",
  "info": {"title": "t", "version": "1"},
  "components": {"schemas": {"Thing": {"type": "object", "additionalProperties": false, "required": ["id"],
    "properties": {"id": {"type": "string"}, "note": {"type": ["string", "null"]}}}}},
  "paths": {
    "/things": {"post": {
      "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object",
        "properties": {"id": {"type": "string"}}}}}},
      "responses": {
        "201": {"description": "created", "headers": {"Location": {"required": true, "schema": {"type": "string"}}},
          "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
        "422": {"description": "bad", "content": {"application/problem+json": {"schema": {"type": "object", "required": ["status"]}}}}}}},
    "/things/{id}:touch": {"post": {"parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}}},
    "/things/{id}": {"get": {"parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "schema": {"type": "integer"}}],
      "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}}}
  }
}`

// answer is what the fake server answers.
type answer struct {
	status      int
	contentType string
	body        string
	location    bool
}

func exchange(t *testing.T, c *apispec.Checker, a answer, method, path, body string) {
	t.Helper()
	h := c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Error(err)
		}
		ct := a.contentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		if a.location {
			w.Header().Set("Location", "/things/a")
		}
		w.WriteHeader(a.status)
		if _, err := io.WriteString(w, a.body); err != nil {
			t.Error(err)
		}
	}))
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, rd))
}

func TestChecker(t *testing.T) {
	spec, err := apispec.Parse([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	thing := `{"id":"a","note":null}`
	for _, tc := range []struct {
		name, method, path, reqBody string
		answer
		want string // substring of the one finding; "" none
	}{
		{"matches", http.MethodGet, "/things/a", "", answer{status: 200, body: thing}, ""},
		{"colon verb", http.MethodPost, "/things/a:touch", "", answer{status: 200, body: thing}, ""},
		{"created", http.MethodPost, "/things", `{"id":"a"}`, answer{status: 201, body: thing, location: true}, ""},
		{"bad request refused", http.MethodPost, "/things", `{"id":1}`,
			answer{status: 422, contentType: "application/problem+json", body: `{"status":422}`}, ""},
		{"wrong body", http.MethodGet, "/things/a", "", answer{status: 200, body: `{"id":1}`}, "does not match"},
		{"extra member", http.MethodGet, "/things/a", "", answer{status: 200, body: `{"id":"a","x":1}`}, "additional"},
		{"wrong media type", http.MethodGet, "/things/a", "", answer{status: 200, contentType: "text/plain", body: thing}, "content type"},
		{"bad query accepted", http.MethodGet, "/things/a?limit=many", "", answer{status: 200, body: thing}, "request does not match"},
		{"bad body accepted", http.MethodPost, "/things", `{"id":1}`, answer{status: 201, body: thing, location: true}, "request body does not match"},
		{"missing body accepted", http.MethodPost, "/things", "", answer{status: 201, body: thing, location: true}, "requires"},
		{"missing header", http.MethodPost, "/things", `{"id":"a"}`, answer{status: 201, body: thing}, "Location"},
		{"undocumented status", http.MethodGet, "/things/a", "", answer{status: 418, body: `{}`}, "status 418 is not in the document"},
		{"unknown path", http.MethodGet, "/nothing", "", answer{status: 404, body: `{}`}, "path not in the document"},
		{"unknown method", http.MethodDelete, "/things/a", "", answer{status: 405, body: `{}`}, "method not in the document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := apispec.NewChecker(spec)
			exchange(t, c, tc.answer, tc.method, tc.path, tc.reqBody)
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
	exchange(t, c, answer{status: 404, body: `{}`}, http.MethodGet, "/nothing", "")
	if errs := c.Errors(); len(errs) > 0 {
		t.Fatalf("a probe answered 404 is allowed: %v", errs)
	}
	if got := c.Seen(); len(got) != 0 {
		t.Fatalf("an unknown route is no operation: %v", got)
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

// Example wraps a handler with a Checker and reads its findings.
func Example() {
	spec, err := apispec.Load()
	if err != nil {
		fmt.Println(err)
		return
	}
	c := apispec.NewChecker(spec)
	h := c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if _, err := io.WriteString(w, `{"status":"fine"}`); err != nil {
			fmt.Println(err)
		}
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/nowhere", nil))
	fmt.Println(c.Seen()["GET /healthz"])
	for _, e := range c.Errors() {
		fmt.Println(e)
	}
	// Output:
	// 1
	// GET /nowhere: path not in the document (answered 200)
}

// TestTransport checks a client's exchanges with a server the test does not wrap.
func TestTransport(t *testing.T) {
	spec, err := apispec.Parse([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.Header().Set("Location", "/things/a")
			w.WriteHeader(http.StatusCreated)
		}
		if _, err := w.Write(b); err != nil { // echoes the request: {"id":...}
			t.Error(err)
		}
	}))
	defer srv.Close()
	c := apispec.NewChecker(spec)
	client := &http.Client{Transport: c.Transport(nil)}
	for _, body := range []string{`{"id":"a"}`, `{"id":"a","extra":true}`} {
		res, err := client.Post(srv.URL+"/things", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Body.Close(); err != nil {
			t.Fatal(err)
		}
		if string(got) != body {
			t.Fatalf("the client read %q, want %q", got, body)
		}
	}
	errs := c.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0], "additional") {
		t.Fatalf("want one finding (the extra member of the second answer), got %v", errs)
	}
	if n := c.Seen()["POST /things"]; n != 2 {
		t.Fatalf("POST /things seen %d times, want 2", n)
	}
}
