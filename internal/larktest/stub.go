package larktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// maxStubs bounds the stubs one test may declare, maxCalls the requests it may make.
const (
	maxStubs        = 1000
	maxCalls        = 10_000
	maxStubBodySize = 1 << 20
)

// stub is one declared upstream answer: for Method and URL (exact, or a prefix when it ends with
// "*"), answer Status/Headers/Body, or fail with Fail ("timeout" or "transport"). Times > 0 makes
// it answer that many requests only; later ones go to the next matching stub.
type stub struct {
	Method, URL string
	Status      int
	Headers     map[string]string
	Body        []byte
	Fail        string
	Times       int
	used        int
}

func (s *stub) matches(method, url string) bool {
	if s.Method != method {
		return false
	}
	if p, ok := strings.CutSuffix(s.URL, "*"); ok {
		return strings.HasPrefix(url, p)
	}
	return s.URL == url
}

// call is a request user code made.
type call struct {
	Method, URL string
	Headers     map[string]string
	Body        []byte
	Stubbed     bool
}

// transport answers user code's outbound requests from the declared stubs, in process: it is the
// egress layer's Transport, so every egress rule still applies before a request gets here.
type transport struct {
	mu    sync.Mutex
	stubs []*stub
	calls []call
}

// timeoutError is what a stub declared with error="timeout" fails with: the egress layer reports
// it as the http_transport error of kind timeout, as a real timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "stubbed timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func (t *transport) add(s *stub) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.stubs) >= maxStubs {
		return fmt.Errorf("more than %d stubs", maxStubs)
	}
	t.stubs = append(t.stubs, s)
	return nil
}

// unstubbed lists the requests no stub answered.
func (t *transport) unstubbed() []call {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []call
	for _, c := range t.calls {
		if !c.Stubbed {
			out = append(out, c)
		}
	}
	return out
}

func (t *transport) recorded() []call {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]call(nil), t.calls...)
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxStubBodySize+1))
		if cerr := req.Body.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		body = b
	}
	hdr := map[string]string{}
	for k := range req.Header {
		hdr[strings.ToLower(k)] = req.Header.Get(k)
	}
	url := req.URL.String()
	t.mu.Lock()
	var hit *stub
	for _, s := range t.stubs {
		if s.matches(req.Method, url) && (s.Times == 0 || s.used < s.Times) {
			hit = s
			break
		}
	}
	if len(t.calls) < maxCalls {
		t.calls = append(t.calls, call{Method: req.Method, URL: url, Headers: hdr, Body: body, Stubbed: hit != nil})
	}
	if hit != nil {
		hit.used++
	}
	t.mu.Unlock()
	if hit == nil {
		return nil, fmt.Errorf("lark test: no stub for %s %s (declare one with t.stub_http)", req.Method, url)
	}
	switch hit.Fail {
	case "timeout":
		return nil, timeoutError{}
	case "transport":
		return nil, fmt.Errorf("lark test: stubbed transport failure for %s %s", req.Method, url)
	}
	h := http.Header{}
	for k, v := range hit.Headers {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: hit.Status, Status: fmt.Sprintf("%d %s", hit.Status, http.StatusText(hit.Status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: io.NopCloser(bytes.NewReader(hit.Body)),
		ContentLength: int64(len(hit.Body)), Request: req}, nil
}

// decodeBody returns b as JSON when it is JSON, else as text.
func decodeBody(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err == nil && !dec.More() {
		return v
	}
	return string(b)
}
