// Package apispec checks HTTP traffic against Lark's OpenAPI document (internal/api/openapi): a
// Checker wraps an http.Handler, lets every request through unchanged and records, for each
// exchange, where the request or the response departs from the document. Tests wrap the API
// handler with it, so that the document and the server cannot drift apart unnoticed.
//
// It is a test aid: it buffers bodies (up to a bound) and is not meant for production traffic.
package apispec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/larkrun/lark/internal/api/openapi"
)

// MaxBody bounds the bytes of a request or response body the Checker keeps to validate; a longer
// body is passed through but not validated.
const MaxBody = 8 << 20

// Spec is the loaded, validated document, its path matcher and its compiled body schemas.
//
// kin-openapi loads and validates the document and checks parameters and headers. Bodies are
// checked with JSON Schema 2020-12 (santhosh-tekuri/jsonschema, on which kin-openapi builds for
// OpenAPI 3.1), each schema compiled once: kin-openapi compiles a schema on every validation, and
// falls back to OpenAPI 3.0 rules for schemas with $refs.
type Spec struct {
	doc    *openapi3.T
	routes []route

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

// docURL is the document's URL for the schema compiler: body schemas are JSON pointers into it.
const docURL = "urn:lark:openapi.json"

// route is one operation with the regular expression of its path template.
type route struct {
	re       *regexp.Regexp
	params   []string
	literal  int // literal characters of the template: the more, the more specific
	path     string
	method   string
	pathItem *openapi3.PathItem
	op       *openapi3.Operation
}

var (
	loadOnce sync.Once
	loaded   *Spec
	loadErr  error
)

// Load parses and validates the embedded document once per process and returns it.
func Load() (*Spec, error) {
	loadOnce.Do(func() { loaded, loadErr = Parse(openapi.Document()) })
	return loaded, loadErr
}

// Parse loads an OpenAPI 3.1 document, validates it and prepares its path matcher.
func Parse(raw []byte) (*Spec, error) {
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("apispec: load: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("apispec: invalid document: %w", err)
	}
	tree, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("apispec: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, tree); err != nil {
		return nil, fmt.Errorf("apispec: %w", err)
	}
	s := &Spec{doc: doc, compiler: c, compiled: map[string]*jsonschema.Schema{}}
	for path, item := range doc.Paths.Map() {
		re, params, literal, err := compileTemplate(path)
		if err != nil {
			return nil, err
		}
		for method, op := range item.Operations() {
			s.routes = append(s.routes, route{re: re, params: params, literal: literal, path: path,
				method: method, pathItem: item, op: op})
		}
	}
	// Most specific first, so that /x/{id}/y wins over a template that could swallow it.
	sort.Slice(s.routes, func(i, j int) bool {
		if s.routes[i].literal != s.routes[j].literal {
			return s.routes[i].literal > s.routes[j].literal
		}
		return s.routes[i].path+s.routes[i].method < s.routes[j].path+s.routes[j].method
	})
	return s, nil
}

var paramRE = regexp.MustCompile(`\{([^{}]+)\}`)

// compileTemplate turns /a/{id}:verb into ^/a/([^/]+):verb$ (parameters match one escaped path
// segment, or the part of it before a colon verb).
func compileTemplate(path string) (*regexp.Regexp, []string, int, error) {
	var b strings.Builder
	var params []string
	literal := 0
	b.WriteString("^")
	last := 0
	for _, m := range paramRE.FindAllStringSubmatchIndex(path, -1) {
		b.WriteString(regexp.QuoteMeta(path[last:m[0]]))
		literal += m[0] - last
		params = append(params, path[m[2]:m[3]])
		if m[1] < len(path) && path[m[1]] == ':' {
			b.WriteString(`([^/:]+)`)
		} else {
			b.WriteString(`([^/]+)`)
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(path[last:]))
	literal += len(path) - last
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, nil, 0, fmt.Errorf("apispec: path %s: %w", path, err)
	}
	return re, params, literal, nil
}

// schemaAt returns the compiled schema at a JSON pointer into the document.
func (s *Spec) schemaAt(ptr string) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[ptr]; ok {
		return sch, nil
	}
	sch, err := s.compiler.Compile(docURL + ptr)
	if err != nil {
		return nil, err
	}
	s.compiled[ptr] = sch
	return sch, nil
}

// escape escapes a JSON pointer token (RFC 6901).
func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// validateBody checks body, of media type contentType, against the content map of a request or
// response found at ptr ("#/paths/..." or a component's "$ref"). It returns "" when it matches.
func (s *Spec) validateBody(ptr string, content openapi3.Content, contentType string, body []byte) string {
	if len(content) == 0 {
		if len(bytes.TrimSpace(body)) > 0 {
			return "has a body but the document describes none"
		}
		return ""
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Sprintf("content type %q: %v", contentType, err)
	}
	if content.Get(mt) == nil {
		return fmt.Sprintf("content type %q is not one the document lists", mt)
	}
	if content[mt] == nil {
		mt = firstMatch(content, mt)
	}
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return "" // an opaque body (a webhook delivery): its media type is all there is to check
	}
	sch, err := s.schemaAt(ptr + "/content/" + escape(mt) + "/schema")
	if err != nil {
		return fmt.Sprintf("schema: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Sprintf("body is not JSON: %v", err)
	}
	if err := sch.Validate(v); err != nil {
		return err.Error()
	}
	return ""
}

// mediaType is the media type of a Content-Type value, without parameters.
func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return contentType
	}
	return mt
}

// firstMatch returns the content key that matched mt (a range such as */*).
func firstMatch(content openapi3.Content, mt string) string {
	want := content.Get(mt)
	for k, v := range content {
		if v == want {
			return k
		}
	}
	return mt
}

// Operations returns every operation of the document as "METHOD /path".
func (s *Spec) Operations() []string {
	out := make([]string, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, r.method+" "+r.path)
	}
	sort.Strings(out)
	return out
}

// find returns the operation for method and escaped path, and its path parameters.
func (s *Spec) find(method, escapedPath string) (*route, map[string]string) {
	if method == http.MethodHead {
		if rt, p := s.find1(http.MethodHead, escapedPath); rt != nil {
			return rt, p
		}
		method = http.MethodGet // HEAD is served as GET without a body
	}
	return s.find1(method, escapedPath)
}

func (s *Spec) find1(method, escapedPath string) (*route, map[string]string) {
	for i := range s.routes {
		rt := &s.routes[i]
		if rt.method != method {
			continue
		}
		m := rt.re.FindStringSubmatch(escapedPath)
		if m == nil {
			continue
		}
		params := make(map[string]string, len(rt.params))
		for j, name := range rt.params {
			params[name] = m[j+1]
		}
		return rt, params
	}
	return nil, nil
}

// pathKnown reports whether any operation's template matches the escaped path.
func (s *Spec) pathKnown(escapedPath string) bool {
	return slices.ContainsFunc(s.routes, func(r route) bool { return r.re.MatchString(escapedPath) })
}

// Checker validates the exchanges of the handler it wraps (Wrap), or of a client's requests
// (Transport). It is safe for concurrent use.
type Checker struct {
	spec *Spec

	mu     sync.Mutex
	errs   []string
	seen   map[string]int
	probes bool
}

// NewChecker returns a Checker for spec.
func NewChecker(spec *Spec) *Checker {
	return &Checker{spec: spec, seen: map[string]int{}}
}

// AllowUnknownRoutes lets requests to a path or method the document lacks pass when they are
// answered 404 or 405 (tests that probe unknown routes on purpose).
func (c *Checker) AllowUnknownRoutes() *Checker {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probes = true
	return c
}

// Errors returns the findings so far, one line each.
func (c *Checker) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs)
}

// Seen returns how many times each documented operation ("METHOD /path") was exercised.
func (c *Checker) Seen() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.seen))
	for k, v := range c.seen {
		out[k] = v
	}
	return out
}

func (c *Checker) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// Wrap returns next with every exchange checked.
func (c *Checker) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var reqBody *capture
		if r.Body != nil && r.Body != http.NoBody {
			reqBody = &capture{limit: MaxBody}
			r.Body = &teeBody{ReadCloser: r.Body, c: reqBody}
		}
		// The validators need the request as sent: keep a copy before the handler changes it.
		orig := r.Clone(r.Context())
		rec := &recorder{ResponseWriter: w, body: capture{limit: MaxBody}}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status, rec.header = http.StatusOK, w.Header().Clone()
		}
		c.check(orig, reqBody, rec)
	})
}

// Transport returns a RoundTripper that sends each request through base (nil:
// http.DefaultTransport) and checks the exchange, for clients of a server the test does not wrap.
// It reads up to MaxBody bytes of each body ahead of the caller; the caller still reads all of it.
func (c *Checker) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{c: c, base: base}
}

type transport struct {
	c    *Checker
	base http.RoundTripper
}

// prefix reads up to MaxBody+1 bytes of rc into a capture and returns a body that replays them
// before the rest of rc.
func prefix(rc io.ReadCloser) (*capture, io.ReadCloser, error) {
	b, err := io.ReadAll(io.LimitReader(rc, MaxBody+1))
	if err != nil {
		return nil, nil, errors.Join(err, rc.Close())
	}
	c := &capture{limit: MaxBody}
	c.write(b)
	return c, struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), rc), rc}, nil
}

// RoundTrip sends r and checks the exchange.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	sent := r
	var reqBody *capture
	if r.Body != nil && r.Body != http.NoBody {
		c, body, err := prefix(r.Body)
		if err != nil {
			return nil, err
		}
		reqBody = c
		sent = r.Clone(r.Context())
		sent.Body = body
	}
	res, err := t.base.RoundTrip(sent)
	if err != nil {
		return nil, err
	}
	rec := &recorder{status: res.StatusCode, header: res.Header.Clone()}
	if res.Body != nil {
		c, body, err := prefix(res.Body)
		if err != nil {
			return nil, err
		}
		rec.body = *c
		res.Body = body
	}
	t.c.check(r, reqBody, rec)
	return res, nil
}

func (c *Checker) check(r *http.Request, reqBody *capture, rec *recorder) {
	where := r.Method + " " + r.URL.RequestURI()
	rt, params := c.spec.find(r.Method, r.URL.EscapedPath())
	if rt == nil {
		c.mu.Lock()
		probes := c.probes
		c.mu.Unlock()
		if probes && (rec.status == http.StatusNotFound || rec.status == http.StatusMethodNotAllowed) {
			return
		}
		if c.spec.pathKnown(r.URL.EscapedPath()) {
			c.fail("%s: method not in the document (answered %d)", where, rec.status)
		} else {
			c.fail("%s: path not in the document (answered %d)", where, rec.status)
		}
		return
	}
	c.mu.Lock()
	c.seen[rt.method+" "+rt.path]++
	c.mu.Unlock()
	opPtr := "#/paths/" + escape(rt.path) + "/" + strings.ToLower(rt.method)

	if rec.status >= 200 && rec.status < 300 {
		c.checkRequest(r, params, rt, opPtr, reqBody, where, rec.status)
	}

	resp := rt.op.Responses.Status(rec.status)
	if resp == nil || resp.Value == nil {
		c.fail("%s: status %d is not in the document", where, rec.status)
		return
	}
	for name, h := range resp.Value.Headers {
		if h.Value != nil && h.Value.Required && rec.header.Get(name) == "" {
			c.fail("%s: response %d lacks the %s header the document requires", where, rec.status, name)
		}
	}
	if r.Method == http.MethodHead {
		return // no body to check
	}
	if rec.body.truncated {
		c.fail("%s: response body over %d bytes not validated", where, MaxBody)
		return
	}
	ptr := resp.Ref
	if ptr == "" {
		ptr = opPtr + "/responses/" + strconv.Itoa(rec.status)
	} else if !strings.HasPrefix(ptr, "#/") {
		c.fail("%s: response $ref %q: only local references are supported", where, ptr)
		return
	}
	body := rec.body.buf.Bytes()
	if enc := rec.header.Get("Content-Encoding"); enc != "" && enc != "identity" && len(body) > 0 {
		// Compressed (the metrics): only the media type is checked.
		if resp.Value.Content.Get(mediaType(rec.header.Get("Content-Type"))) == nil {
			c.fail("%s: response %d: content type %q is not one the document lists", where, rec.status, rec.header.Get("Content-Type"))
		}
		return
	}
	if msg := c.spec.validateBody(ptr, resp.Value.Content, rec.header.Get("Content-Type"), body); msg != "" {
		c.fail("%s: response %d does not match the document: %s\n\tbody: %s", where, rec.status, msg, clip(body))
	}
}

// checkRequest checks a request that succeeded: parameters and headers with kin-openapi, the body
// with the compiled schema.
func (c *Checker) checkRequest(r *http.Request, params map[string]string, rt *route, opPtr string, reqBody *capture, where string, status int) {
	route := &routers.Route{Spec: c.spec.doc, Path: rt.path, PathItem: rt.pathItem, Method: rt.method, Operation: rt.op}
	opts := &openapi3filter.Options{
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults: true,
		ExcludeRequestBody:  true,
		MultiError:          true,
	}
	r.Body = http.NoBody
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		c.fail("%s: answered %d but the request does not match the document: %v", where, status, err)
	}
	rb := rt.op.RequestBody
	var body []byte
	if reqBody != nil {
		if reqBody.truncated {
			c.fail("%s: request body over %d bytes not validated", where, MaxBody)
			return
		}
		body = reqBody.buf.Bytes()
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if rb != nil && rb.Value != nil && rb.Value.Required {
			c.fail("%s: answered %d without the request body the document requires", where, status)
		}
		return
	}
	if rb == nil || rb.Value == nil {
		c.fail("%s: answered %d to a request body the document does not describe", where, status)
		return
	}
	ptr := rb.Ref
	if ptr == "" {
		ptr = opPtr + "/requestBody"
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json" // Lark does not check the request's Content-Type (docs/api.md §1)
	}
	if msg := c.spec.validateBody(ptr, rb.Value.Content, ct, body); msg != "" {
		c.fail("%s: answered %d but the request body does not match the document: %s", where, status, msg)
	}
}

func clip(b []byte) string {
	const n = 600
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// capture keeps up to limit bytes.
type capture struct {
	buf       bytes.Buffer
	limit     int
	truncated bool
}

func (c *capture) write(p []byte) {
	if room := c.limit - c.buf.Len(); room < len(p) {
		c.truncated = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return
	}
	c.buf.Write(p)
}

// teeBody copies what the handler reads of the request body.
type teeBody struct {
	io.ReadCloser
	c *capture
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.c.write(p[:n])
	return n, err
}

// recorder passes the response through and keeps its status, headers and body. Unwrap lets
// http.ResponseController reach the connection (deadlines, flushing).
type recorder struct {
	http.ResponseWriter
	status int
	header http.Header
	body   capture
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.header = r.ResponseWriter.Header().Clone()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	r.body.write(p)
	return r.ResponseWriter.Write(p)
}

// Flush flushes the underlying writer when it can.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// CheckedMain runs a test binary's tests (call it from TestMain) with a Checker of the OpenAPI
// document made before them and handed to set, for the tests to wrap their servers or clients
// with. It returns m.Run's exit code, or 1 when any call disagreed with the document or none was
// checked at all.
func CheckedMain(m interface{ Run() int }, set func(*Checker)) int {
	spec, err := Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "load the OpenAPI document:", err)
		return 1
	}
	c := NewChecker(spec)
	set(c)
	code := m.Run()
	if errs := c.Errors(); len(errs) > 0 {
		fmt.Fprintln(os.Stderr, "calls that disagree with the OpenAPI document:")
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, " ", e)
		}
		code = 1
	}
	if code == 0 && len(c.Seen()) == 0 {
		fmt.Fprintln(os.Stderr, "no call went through the OpenAPI check")
		code = 1
	}
	return code
}
