package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exampleFolders are the deploy folders of examples/, each deployed and run by TestExamplesDeployAndRun.
var exampleFolders = []string{"calculate_tax", "process_order", "customer_profile", "reserve_inventory",
	"scheduled_report", "webhook_order", "sales_dag"}

// exampleTerminal are the statuses an invocation does not leave (workflows add compensated).
var exampleTerminal = map[string]bool{"succeeded": true, "failed": true, "dead_lettered": true,
	"canceled": true, "compensated": true}

// upstreamCall is one request the stand-in received.
type upstreamCall struct {
	Method, Path string
	Body         map[string]any
}

// standIn plays every service the examples call, under one path prefix each; the shop under
// /shop-down answers 503 to shipping labels, so process_order fails there and is rolled back.
type standIn struct {
	mu    sync.Mutex
	calls []upstreamCall
}

var standInAnswers = map[string]string{
	"GET /crm/customers/C-1":            `{"name": "Ada"}`,
	"GET /orders/by-customer/C-1":       `{"orders": [{"id": "O-1"}]}`,
	"POST /shop/inventory/reserve":      `{"reservation_id": "RSV-1"}`,
	"POST /shop/payments/charge":        `{"transaction_id": "TXN-1"}`,
	"POST /shop/shipping/labels":        `{"tracking_id": "TRK-1"}`,
	"POST /shop-down/inventory/reserve": `{"reservation_id": "RSV-2"}`,
	"POST /shop-down/payments/charge":   `{"transaction_id": "TXN-2"}`,
	"POST /shop-down/payments/refund":   `{}`,
	"POST /shop-down/inventory/release": `{}`,
	"POST /inventory/reserve":           `{"reservation_id": "RSV-3"}`,
	"GET /sales/v1/summary":             `{"orders": 42, "revenue": 1234.5}`,
	"POST /chat/v1/messages":            `{"ok": true}`,
	"POST /warehouse/v1/shipments":      `{"shipment_id": "SHP-1"}`,
	"POST /mail/v1/send":                `{"queued": true}`,
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := upstreamCall{Method: r.Method, Path: r.URL.Path}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &c.Body); err != nil {
			http.Error(w, "not a JSON object: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	if r.Method == http.MethodPost && r.URL.Path == "/shop-down/shipping/labels" {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	answer, ok := standInAnswers[r.Method+" "+r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := io.WriteString(w, answer); err != nil {
		return // the runtime hung up: its request fails and the test sees that
	}
}

// callsTo returns the calls received on path.
func (s *standIn) callsTo(path string) []upstreamCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []upstreamCall
	for _, c := range s.calls {
		if c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// invocationView is what the test reads of an invocation record (`lark invocations get -o json`).
type invocationView struct {
	InvocationID string          `json:"invocation_id"`
	Status       string          `json:"status"`
	Result       json.RawMessage `json:"result"`
}

// okCLI runs `lark args...` and requires exit code 0.
func (p *larkProc) okCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := p.cli(t, args...)
	require.Equal(t, 0, r.code, "lark %v\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	return r.stdout
}

// waitInvocation polls `lark invocations get ID -o json` until the status is want, and fails at
// once on another terminal status or when the deadline passes.
func (p *larkProc) waitInvocation(t *testing.T, id, want string, deadline time.Duration) invocationView {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		var rec invocationView
		require.NoError(t, json.Unmarshal([]byte(p.okCLI(t, "invocations", "get", id, "-o", "json")), &rec))
		if rec.Status == want {
			return rec
		}
		require.False(t, exampleTerminal[rec.Status], "invocation %s ended %s, want %s: %s",
			id, rec.Status, want, p.okCLI(t, "invocations", "timeline", id))
		require.True(t, time.Now().Before(end), "invocation %s still %s after %v, want %s", id, rec.Status, deadline, want)
		time.Sleep(100 * time.Millisecond)
	}
}

// startedID is the invocation id `lark invoke --async` printed ("inv_… queued").
func startedID(t *testing.T, out string) string {
	t.Helper()
	f := strings.Fields(out)
	require.NotEmpty(t, f, "no output")
	require.True(t, strings.HasPrefix(f[0], "inv_"), "not an invocation id: %q", out)
	return f[0]
}

// requireResult compares an invocation's result with want, as JSON values.
func requireResult(t *testing.T, rec invocationView, want string) {
	t.Helper()
	require.JSONEq(t, want, string(rec.Result), "result of %s", rec.InvocationID)
}

// TestExamplesDeployAndRun deploys every folder of examples/ to one `lark dev` with `lark deploy`
// (twice: the second changes nothing) and runs each the way its README and tests describe, through
// the CLI binary, with the services the examples call played by a local stand-in.
func TestExamplesDeployAndRun(t *testing.T) {
	up := &standIn{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	p := startLark(t, t.TempDir(), "--unsafe-egress-allow-loopback")

	secret := ""
	for _, name := range exampleFolders {
		dir := filepath.Join(moduleRoot, "examples", name)
		out := p.okCLI(t, "deploy", dir)
		require.Contains(t, out, "Deployed ", "lark deploy examples/%s", name)
		if s, ok := strings.CutPrefix(lineWith(out, "secret (shown once"), "secret (shown once, store it now): "); ok {
			secret = s
		}
	}
	require.True(t, strings.HasPrefix(secret, "whsec_"), "webhook_order's deploy printed no secret")
	for _, name := range exampleFolders {
		out := p.okCLI(t, "deploy", filepath.Join(moduleRoot, "examples", name))
		require.Contains(t, out, "Nothing to deploy: everything is up to date.", "second deploy of examples/%s", name)
	}

	// process_order's failing path waits out four durable backoffs (1+2+4+8 s): start it first.
	down := startedID(t, p.okCLI(t, "invoke", "process_order", "--async", "-p",
		`{"order_id": "ORD-2", "customer_id": "C-2", "shop_url": "`+srv.URL+`/shop-down"}`))

	t.Run("calculate_tax", func(t *testing.T) {
		out := p.okCLI(t, "invoke", "calculate_tax", "--follow", "-o", "json",
			"--params", `{"invoice_id": "inv_001", "amount": 100}`)
		// One JSON line per timeline entry, then the record.
		dec := json.NewDecoder(strings.NewReader(out))
		var rec invocationView
		for {
			var v invocationView
			if err := dec.Decode(&v); errors.Is(err, io.EOF) {
				break
			} else {
				require.NoError(t, err, out)
			}
			rec = v
		}
		require.Equal(t, "succeeded", rec.Status, out)
		requireResult(t, rec, `{"tax": 10, "total": 110.00000000000001}`) // 000's example, as IEEE 754 doubles
		require.Equal(t, `{"tax":10,"total":110.00000000000001}`, compactJSON(t, rec.Result))

		r := p.cli(t, "invoke", "calculate_tax", "--params", `{"invoice_id": "inv_002"}`)
		require.Equal(t, 3, r.code, "a start without amount is refused: %s", r.stdout)
		require.Contains(t, r.stderr, "amount")
	})

	t.Run("process_order succeeds", func(t *testing.T) {
		out := p.okCLI(t, "invoke", "process_order", "--follow", "-p",
			`{"order_id": "ORD-1", "customer_id": "C-1", "shop_url": "`+srv.URL+`/shop"}`)
		for _, want := range []string{"step=reserve_inventory", "step=charge_payment", "step=create_shipping_label", "succeeded", `"tracking_id": "TRK-1"`} {
			require.Contains(t, out, want)
		}
		require.Less(t, strings.Index(out, "step=reserve_inventory"), strings.Index(out, "step=create_shipping_label"), out)
		require.Len(t, up.callsTo("/shop/shipping/labels"), 1)
	})

	t.Run("customer_profile", func(t *testing.T) {
		out := p.okCLI(t, "invoke", "compose_customer_profile", "-o", "json", "-p",
			`{"customer_id": "C-1", "crm_url": "`+srv.URL+`/crm", "orders_url": "`+srv.URL+`/orders"}`)
		var rec invocationView
		require.NoError(t, json.Unmarshal([]byte(out), &rec), out)
		require.Equal(t, "succeeded", rec.Status, out)
		requireResult(t, rec, `{"name": "Ada", "orders": [{"id": "O-1"}]}`)
	})

	t.Run("reserve_inventory", func(t *testing.T) {
		id := startedID(t, p.okCLI(t, "invoke", "reserve_inventory", "--async", "-p",
			`{"order_id": "ORD-7", "sku": "WIDGET-01", "inventory_url": "`+srv.URL+`/inventory"}`))
		p.waitInvocation(t, id, "suspended", 15*time.Second)
		out := p.okCLI(t, "events", "publish", "gts.x.core.events.event.v1~vendor.app.orders.approved.v1~",
			"--data", `{"order_id": "ORD-7", "approver": "alice"}`)
		require.Contains(t, out, "1 waiting workflows resumed", out)
		rec := p.waitInvocation(t, id, "succeeded", 15*time.Second)
		requireResult(t, rec, `{"reservation_id": "RSV-3", "approved_by": "alice"}`)
		require.Empty(t, up.callsTo("/inventory/release"), "an approved reservation is kept")
	})

	t.Run("scheduled_report", func(t *testing.T) {
		out := p.okCLI(t, "schedules", "trigger", "daily-sales-report", "--params",
			`{"sales_url": "`+srv.URL+`/sales", "chat_url": "`+srv.URL+`/chat"}`)
		require.Contains(t, out, "triggered daily-sales-report", out)
		_, rest, ok := strings.Cut(out, "invocation ")
		require.True(t, ok, out)
		rec := p.waitInvocation(t, strings.Fields(rest)[0], "succeeded", 15*time.Second)
		requireResult(t, rec, `{"orders": 42, "revenue": 1234.5}`)
		posts := up.callsTo("/chat/v1/messages")
		require.Len(t, posts, 1)
		require.Equal(t, "#sales", posts[0].Body["channel"], "the schedule's input_overrides")
		require.Equal(t, "42 orders, 1234.5 EUR", posts[0].Body["text"])
		out = p.okCLI(t, "schedules", "history", "daily-sales-report")
		require.Contains(t, out, "succeeded", out)
	})

	t.Run("sales_dag", func(t *testing.T) {
		out := p.okCLI(t, "dag", "plan", "daily_sales", "--partition", "2026-03-02")
		require.Contains(t, out, "fingerprint ", out)
		out = p.okCLI(t, "invoke", "daily_sales", "-p", `{"partition_key": "2026-03-02"}`, "--follow")
		require.Contains(t, out, "task_succeeded", out)
		run := strings.Fields(lineWith(out, " succeeded in "))[0]
		out = p.okCLI(t, "dag", "tasks", run)
		require.Equal(t, 3, strings.Count(out, "SUCCEEDED"), out)
		out = p.okCLI(t, "assets", "list")
		require.Contains(t, out, "sales.daily_summary", out)
	})

	t.Run("webhook_order", func(t *testing.T) {
		body := `{"order_id": "ORD-77", "email": "ada@example.com", "items": [{"sku": "WIDGET-01", "qty": 2}],` +
			` "warehouse_url": "` + srv.URL + `/warehouse", "mail_url": "` + srv.URL + `/mail"}`
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		_, err := io.WriteString(mac, ts+"."+body)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, p.URL+apiBase+"/webhooks/dev/shop-order-created", bytes.NewBufferString(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Shop-Topic", "orders/create")
		req.Header.Set("X-Shop-Timestamp", ts)
		req.Header.Set("X-Shop-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		res, err := httpClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, res.StatusCode, "%s", raw)
		var accepted struct {
			InvocationID string `json:"invocation_id"`
		}
		require.NoError(t, json.Unmarshal(raw, &accepted))

		// It books the shipment, confirms, then sleeps two days durably.
		p.waitInvocation(t, accepted.InvocationID, "suspended", 15*time.Second)
		out := p.okCLI(t, "invocations", "timeline", accepted.InvocationID)
		require.Contains(t, out, "step=book_shipment", out)
		require.Contains(t, out, "step=confirm", out)
		require.NotContains(t, out, "step=ask_for_review", out)
		mails := up.callsTo("/mail/v1/send")
		require.Len(t, mails, 1)
		require.Equal(t, "order_confirmed", mails[0].Body["template"])
		require.Equal(t, "SHP-1", mails[0].Body["shipment_id"])
		var rec struct {
			Params struct {
				Headers map[string]string `json:"headers"`
			} `json:"params"`
		}
		require.NoError(t, json.Unmarshal([]byte(p.okCLI(t, "invocations", "get", accepted.InvocationID, "-o", "json")), &rec))
		require.Equal(t, "orders/create", rec.Params.Headers["x-shop-topic"])
		require.NotContains(t, rec.Params.Headers, "x-shop-signature", "credentials are never forwarded")
	})

	t.Run("process_order is rolled back", func(t *testing.T) {
		p.waitInvocation(t, down, "compensated", 30*time.Second)
		require.Len(t, up.callsTo("/shop-down/shipping/labels"), 5, "traits.retry: five attempts")
		require.Len(t, up.callsTo("/shop-down/payments/charge"), 1, "a step that succeeded is not repeated")
		out := p.okCLI(t, "invocations", "list", "--entrypoint", "rollback_order", "-o", "json")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 1, out)
		var rb invocationView
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &rb))
		if rb.Status != "succeeded" {
			rb = p.waitInvocation(t, rb.InvocationID, "succeeded", 15*time.Second)
		}
		requireResult(t, rb, `{"undone": ["charge_payment", "reserve_inventory"]}`)
		refunds := up.callsTo("/shop-down/payments/refund")
		require.Len(t, refunds, 1)
		require.Equal(t, "TXN-2", refunds[0].Body["transaction_id"])
		releases := up.callsTo("/shop-down/inventory/release")
		require.Len(t, releases, 1)
		require.Equal(t, "RSV-2", releases[0].Body["reservation_id"])
	})
}

// lineWith returns the first line of out containing s, trimmed ("" if none).
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// compactJSON is raw without insignificant space.
func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, raw))
	return b.String()
}
