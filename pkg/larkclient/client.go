// Package larkclient is a Go client for Lark's public HTTP API (docs/api.md): entrypoints,
// invocations, DAG plans and runs' tasks, assets, schedules, backfills, events and event types,
// event triggers and their dead letters, webhook triggers and their deliveries, secrets (never
// their values), tokens, the audit log, and tenant usage.
//
//	c, err := larkclient.New("http://127.0.0.1:8080", os.Getenv("LARK_TOKEN"))
//	res, err := c.StartInvocation(ctx, larkclient.StartInvocation{EntrypointID: id, Params: json.RawMessage(`{"amount":100}`)})
//
// Every method takes a context. A non-2xx answer is returned as a *Problem (the RFC 9457 document
// the server sent), so callers can test errors.As(err, &p) and read p.Status, p.Errors and friends.
// Resources are typed with the members most callers read, and each keeps the raw JSON the server
// sent in its Raw field, so nothing the API adds is lost.
package larkclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// BasePath is the path prefix of every API route.
const BasePath = "/api/serverless-runtime/v1"

// MaxResponseBytes bounds a response body the client reads (a larger one is an error): the server
// bounds its payloads well below it.
const MaxResponseBytes = 64 << 20

// Client calls one Lark server with one bearer token. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
	agent string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc (timeouts, transports, tests).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

// New returns a client for the server at baseURL (scheme and host, e.g. "http://127.0.0.1:8080";
// a trailing API base path is accepted) that authenticates with token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("server URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http(s)://host[:port]", baseURL)
	}
	base := strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/")
	base = strings.TrimSuffix(base, BasePath)
	c := &Client{base: base, token: token, http: &http.Client{Timeout: 5 * time.Minute}, agent: "larkclient"}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL returns the server address the client calls (without the API base path).
func (c *Client) BaseURL() string { return c.base }

// request is one API call.
type request struct {
	method string
	path   string     // under BasePath, already escaped
	query  url.Values // may be nil
	body   any        // nil: no body; json.RawMessage or []byte are sent as they are
	header http.Header
}

// response is a successful answer, read completely.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends r and returns the answer; any status outside 2xx is returned as a *Problem.
func (c *Client) do(ctx context.Context, r request) (*response, error) {
	var rd io.Reader
	if r.body != nil {
		var b []byte
		switch v := r.body.(type) {
		case json.RawMessage:
			b = v
		case []byte:
			b = v
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				return nil, fmt.Errorf("encoding the request body: %w", err)
			}
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + BasePath + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.agent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", r.method, r.path, err)
	}
	if len(body) > MaxResponseBytes {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", r.method, r.path, MaxResponseBytes)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return nil, newProblem(res, body)
	}
	return &response{status: res.StatusCode, header: res.Header, body: body}, nil
}

// call sends r and decodes a JSON answer into out (when out is not nil).
func (c *Client) call(ctx context.Context, r request, out any) (*response, error) {
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := decode(res.body, out); err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
		}
	}
	return res, nil
}

// rawSetter is a resource that keeps the JSON it was decoded from.
type rawSetter interface{ setRaw(json.RawMessage) }

// Raw is embedded in every resource: the JSON object the server sent, unchanged.
type Raw struct {
	// JSON is the resource exactly as the server sent it.
	JSON json.RawMessage `json:"-"`
}

func (r *Raw) setRaw(b json.RawMessage) { r.JSON = b }

// MarshalJSON returns the raw JSON, so that a resource printed with encoding/json shows what the
// server sent.
func (r Raw) MarshalJSON() ([]byte, error) {
	if len(r.JSON) == 0 {
		return []byte("null"), nil
	}
	return r.JSON, nil
}

// decode unmarshals b into out and, for resources, keeps b.
func decode(b []byte, out any) error {
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding the answer: %w", err)
	}
	if rs, ok := out.(rawSetter); ok {
		rs.setRaw(append(json.RawMessage(nil), b...))
	}
	return nil
}

// esc escapes one path element (ids may hold '~' and ':' is never part of one).
func esc(id string) string { return url.PathEscape(id) }

// errEmptyID is returned by methods given an empty id.
var errEmptyID = errors.New("larkclient: empty id")

func need(id string) error {
	if strings.TrimSpace(id) == "" {
		return errEmptyID
	}
	return nil
}
