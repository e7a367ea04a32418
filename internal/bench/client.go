package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// APIBase is the path prefix of Lark's API.
const APIBase = "/api/serverless-runtime/v1"

// BenchTenant is the tenant every scenario provisions.
const BenchTenant = "bench"

const fnPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~"

// TaxID is the README's calculate_tax entrypoint.
const TaxID = fnPrefix + "vendor.app.billing.calculate_tax.v1~"

// taxDefinition is the README's calculate_tax registration with a %s for its entrypoint_id.
const taxDefinition = `{
  "entrypoint_id": %q,
  "title": "Calculate Tax",
  "description": "Calculate tax for invoice.",
  "tags": ["billing", "tax"],
  "owner": {"owner_type": "tenant"},
  "schema": {
    "params": {
      "type": "object",
      "properties": {"invoice_id": {"type": "string"}, "amount": {"type": "number"}},
      "required": ["invoice_id", "amount"]
    },
    "returns": {
      "type": "object",
      "properties": {"tax": {"type": "number"}, "total": {"type": "number"}}
    },
    "errors": ["gts.x.core.serverless.err.v1~x.core.serverless.err.validation.v1~"]
  },
  "traits": {
    "invocation": {"supported": ["sync", "async"], "default": "async"},
    "is_idempotent": true,
    "caching": {"max_age_seconds": 0},
    "rate_limit": {
      "strategy": "gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.token_bucket.v1~",
      "config": {"max_requests_per_second": 50, "max_requests_per_minute": 1000, "burst_size": 20}
    },
    "limits": {"timeout_seconds": 30, "memory_mb": 128, "cpu": 0.2, "max_concurrent": 100},
    "retry": {"max_attempts": 3, "initial_delay_ms": 200, "max_delay_ms": 10000, "backoff_multiplier": 2.0}
  },
  "implementation": {
    "adapter": "gts.x.core.serverless.adapter.starlark.v1~",
    "kind": "code",
    "code": {
      "language": "starlark",
      "source": "def main(ctx, input):\n  return {\"tax\": input.amount * 0.1, \"total\": input.amount * 1.1}\n"
    }
  }
}`

// TaxDefinition is the README's calculate_tax registration body under entrypoint id id.
func TaxDefinition(id string) []byte { return fmt.Appendf(nil, taxDefinition, id) }

// UnlimitedTaxDefinition is TaxDefinition without traits.rate_limit (the README's 50 requests a
// second would throttle a throughput benchmark: the benchmarks measure execution, not the limiter).
func UnlimitedTaxDefinition(id string) []byte {
	var body map[string]any
	if err := json.Unmarshal(TaxDefinition(id), &body); err != nil {
		panic("bench: the calculate_tax definition is not JSON: " + err.Error())
	}
	delete(body["traits"].(map[string]any), "rate_limit")
	out, err := json.Marshal(body)
	if err != nil {
		panic("bench: the calculate_tax definition does not encode: " + err.Error())
	}
	return out
}

// TaxSyncRequest is the README's sync invocation of calculate_tax.
var TaxSyncRequest = []byte(`{"entrypoint_id": "` + TaxID + `",
       "mode": "sync", "params": {"invoice_id": "inv_001", "amount": 100}}`)

// NoopID is the trivial function of the async scenario.
const NoopID = fnPrefix + "vendor.app.bench.noop.v1~"

// noopDefinition: `def main(ctx, input): return {"ok": True}`, async by default, no retries.
var noopDefinition = []byte(`{
  "entrypoint_id": "` + NoopID + `",
  "title": "No-op",
  "owner": {"owner_type": "tenant"},
  "schema": {"params": {"type": "object"}},
  "traits": {"invocation": {"supported": ["sync", "async"], "default": "async"},
             "retry": {"max_attempts": 1}, "limits": {"timeout_seconds": 30}},
  "implementation": {"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
    "code": {"language": "starlark", "source": "def main(ctx, input):\n  return {\"ok\": True}\n"}}
}`)

var noopAsyncRequest = []byte(`{"entrypoint_id": "` + NoopID + `", "mode": "async", "params": {}}`)

// NewHTTPClient is a keep-alive client for conns concurrent callers of one host: no proxy, no
// compression, one idle connection kept per caller.
func NewHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// API calls one Lark process.
type API struct {
	URL    string // http://host:port
	Client *http.Client
}

// Call sends method APIBase+path with body and token, reads the whole answer and returns it; any status other than want is a *statusError.
func (a *API) Call(ctx context.Context, method, path, token string, body []byte, want int) (*http.Response, []byte, error) {
	target := a.URL + APIBase + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := a.Client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return res, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if res.StatusCode != want {
		return res, b, &statusError{Method: method, Path: path, Status: res.StatusCode, Want: want, Body: string(b)}
	}
	return res, b, nil
}

// Provision enables tenant BenchTenant (any outbound domain) with the operator token and returns
// a new admin token of it.
func (a *API) Provision(ctx context.Context, operatorToken string) (string, error) {
	if _, _, err := a.Call(ctx, http.MethodPost, "/tenants/"+BenchTenant+"/serverless-runtime:enable", operatorToken,
		[]byte(`{"governance":{"allowed_outbound_domains":["*"]}}`), http.StatusOK); err != nil {
		return "", fmt.Errorf("enable tenant: %w", err)
	}
	_, b, err := a.Call(ctx, http.MethodPost, "/tokens", operatorToken,
		[]byte(`{"tenant_id":"`+BenchTenant+`","subject_id":"bench","roles":["admin"],"description":"lark bench"}`), http.StatusCreated)
	if err != nil {
		return "", fmt.Errorf("issue token: %w", err)
	}
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.Token == "" {
		return "", fmt.Errorf("issue token: no token in %s", b)
	}
	return tok.Token, nil
}

// Register registers a definition (201).
func (a *API) Register(ctx context.Context, token string, definition []byte) error {
	_, _, err := a.Call(ctx, http.MethodPost, "/entrypoints", token, definition, http.StatusCreated)
	return err
}

// Activate activates a draft (200).
func (a *API) Activate(ctx context.Context, token, id string) error {
	_, _, err := a.Call(ctx, http.MethodPost, "/entrypoints/"+id+":status", token,
		[]byte(`{"action":"activate","release_notes":"lark bench"}`), http.StatusOK)
	return err
}

var succeeded = []byte(`"status":"succeeded"`)

// InvokeSync runs one sync invocation and checks that it succeeded.
func (a *API) InvokeSync(ctx context.Context, token string, body []byte) error {
	_, b, err := a.Call(ctx, http.MethodPost, "/invocations", token, body, http.StatusOK)
	if err != nil {
		return err
	}
	return checkSucceeded(b)
}

// checkSucceeded checks that a sync answer's record succeeded.
func checkSucceeded(b []byte) error {
	if !bytes.Contains(b, succeeded) {
		return fmt.Errorf("sync invocation did not succeed: %.300s", b)
	}
	return nil
}

// invocationID reads record.invocation_id from an InvocationResult.
func invocationID(b []byte) (string, error) {
	var r struct {
		Record struct {
			ID string `json:"invocation_id"`
		} `json:"record"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Record.ID == "" {
		return "", fmt.Errorf("no record.invocation_id in %.300s", b)
	}
	return r.Record.ID, nil
}

// statusOf reads an InvocationRecord's status.
func statusOf(b []byte) (string, error) {
	var r struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Status == "" {
		return "", fmt.Errorf("no status in %.300s", b)
	}
	return r.Status, nil
}

// listInvocations lists invocations of the bench tenant matching filter (at most limit) and returns
// how many came back and a short description of each.
func (a *API) listInvocations(ctx context.Context, token, filter string, limit int) ([]string, error) {
	q := "?$filter=" + url.QueryEscape(filter) + fmt.Sprintf("&limit=%d", limit)
	_, b, err := a.Call(ctx, http.MethodGet, "/invocations"+q, token, nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var page struct {
		Items []struct {
			ID     string          `json:"invocation_id"`
			Status string          `json:"status"`
			Error  json.RawMessage `json:"error"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return nil, fmt.Errorf("list invocations: %w", err)
	}
	out := make([]string, 0, len(page.Items))
	for _, it := range page.Items {
		s := it.ID + " " + it.Status
		if len(it.Error) > 0 && string(it.Error) != "null" {
			s += " " + string(it.Error)
		}
		out = append(out, s)
	}
	return out, nil
}
