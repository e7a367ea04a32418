package api_test

// The webhook trigger API and its receiver: every status code of the receiver, each
// authentication scheme (GitHub-, Stripe- and Slack-style signatures, a generic HMAC, basic,
// bearer, api key) good and bad, the overlap after :regenerate-secret on the fake clock, replays,
// allowed_sources, the 404s that cannot be told apart, the rate limit, the size limit, the payload
// schema, deliveries, audit rows, and a secret that never appears where it is not sent.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

const (
	whkPath = base + "/webhook-triggers"
	hookFn  = fnPrefix + "vendor.app.hooks.receive.v1~"
)

// whkEnv is a server on a fake clock with a master key, a tenant "acme" and an entrypoint that
// takes any object.
type whkEnv struct {
	*env
	clk *clock.Fake
	adm string
	dir string
	// store is the server's Config.Store: "" (SQLite in dir) or a PostgreSQL schema's URL.
	store string
	logs  *syncBuffer
}

func newWhkEnv(t *testing.T, mods ...func(*server.Config)) *whkEnv {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 27, 10, 0, 0, 0, time.UTC))
	setting, err := keyring.Generate()
	require.NoError(t, err)
	kr, err := keyring.Parse(setting)
	require.NoError(t, err)
	logs := &syncBuffer{}
	var dir, st string
	e := newEnv(t, append([]func(*server.Config){func(c *server.Config) {
		c.Clock, c.Keyring, dir, st = clk, kr, c.DataDir, c.Store
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}}, mods...)...)
	w := &whkEnv{env: e, clk: clk, adm: invTenant(t, e, "acme"), dir: dir, store: st, logs: logs}
	e.registerActive(t, w.adm, invFn(t, "hooks.receive.v1~", "def main(ctx, input):\n    return {\"got\": input[\"body\"]}\n",
		set("traits.invocation", obj{"supported": []any{"async"}, "default": "async"})))
	return w
}

// create registers a webhook trigger (entrypoint hookFn unless given) and returns the answer.
func (w *whkEnv) create(t *testing.T, body obj) obj {
	t.Helper()
	if body["entrypoint_id"] == nil {
		body["entrypoint_id"] = hookFn
	}
	return w.expect(t, http.StatusCreated, http.MethodPost, whkPath, w.adm, body).Body
}

// deliver posts body to the receiver of tenant acme's trigger id, with headers.
func (w *whkEnv) deliver(t *testing.T, id, body string, hdr map[string]string) *resp {
	t.Helper()
	return w.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/" + id, body: body, header: hdr})
}

func macHex(h func() hash.Hash, key, msg string) string {
	m := hmac.New(h, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func github(secret, body string) map[string]string {
	return map[string]string{"X-Hub-Signature-256": "sha256=" + macHex(sha256.New, secret, body), "X-GitHub-Event": "push"}
}

func stripe(secret, body string, at time.Time) map[string]string {
	ts := strconv.FormatInt(at.Unix(), 10)
	return map[string]string{"Stripe-Signature": "t=" + ts + ",v1=" + macHex(sha256.New, secret, ts+"."+body)}
}

func slack(secret, body string, at time.Time) map[string]string {
	ts := strconv.FormatInt(at.Unix(), 10)
	return map[string]string{"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + macHex(sha256.New, secret, "v0:"+ts+":"+body)}
}

func TestWebhookGitHubDelivery(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	invDispatcher(t, w.env)
	created := w.create(t, obj{"webhook_trigger_id": "gh-push", "authentication": obj{"type": "hmac_sha256", "format": "github"},
		"allowed_sources": []any{"127.0.0.1", "::1/128"}})
	secret, _ := created["secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"), "the secret is shown on create: %v", created)
	require.Equal(t, base+"/webhooks/acme/gh-push", created["webhook_url"])
	require.Equal(t, "X-Hub-Signature-256", at(created, "authentication")["header"])
	require.Equal(t, []any{"127.0.0.1/32", "::1/128"}, created["allowed_sources"])

	body := `{"ref":"refs/heads/main","commits":[]}`
	hdr := github(secret, body)
	hdr["X-GitHub-Delivery"] = "d-1"
	const traceID = "6bf92f3577b34da6a3ce929d0e0e4738"
	hdr["Traceparent"] = "00-" + traceID + "-20f067aa0ba902b9-01"
	r := w.deliver(t, "gh-push", body, hdr)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	inv, _ := r.Body["invocation_id"].(string)
	require.NotEmpty(t, inv)
	require.NotEmpty(t, r.Body["delivery_id"])

	// The entrypoint receives the body parsed, the selected headers (never the signature), the
	// trigger and delivery ids.
	rec := w.expect(t, http.StatusOK, http.MethodGet, base+"/invocations/"+inv, w.adm, nil).Body
	params := at(rec, "params")
	require.Equal(t, "refs/heads/main", at(params, "body")["ref"])
	require.Equal(t, "gh-push", params["webhook_trigger_id"])
	require.Equal(t, r.Body["delivery_id"], params["delivery_id"])
	headers := at(params, "headers")
	require.Equal(t, "push", headers["x-github-event"])
	require.Equal(t, "d-1", headers["x-github-delivery"])
	require.NotContains(t, headers, "x-hub-signature-256")
	require.Equal(t, traceID, at(rec, "observability")["trace_id"], "the invocation continues the delivery's trace")
	done := invWait(t, w.env, w.adm, inv, "succeeded", "failed")
	require.Equal(t, "succeeded", done["status"], "%v", done)
	require.Equal(t, "refs/heads/main", at(at(done, "result"), "got")["ref"])

	// A redelivery (same X-GitHub-Delivery) answers with the first invocation.
	again := w.deliver(t, "gh-push", body, hdr)
	require.Equal(t, http.StatusAccepted, again.Status, "%s", again)
	require.Equal(t, inv, again.Body["invocation_id"])
	require.Equal(t, true, again.Body["redelivery"])

	// The same signed request without an idempotency key is a replay: refused.
	body2 := `{"ref":"refs/heads/dev"}`
	require.Equal(t, http.StatusAccepted, w.deliver(t, "gh-push", body2, github(secret, body2)).Status)
	replay := w.deliver(t, "gh-push", body2, github(secret, body2))
	require.Equal(t, http.StatusUnauthorized, replay.Status, "%s", replay)
	require.Contains(t, replay.Body["detail"], "replay")

	// A forged signature, a signature by another secret, no signature, a tampered body: 401.
	forged := github("whsec_not-the-secret-at-all-0000000000000", body2)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "gh-push", body2, forged).Status)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "gh-push", body2, nil).Status)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "gh-push", body2+" ", github(secret, body2)).Status)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "gh-push", body2, map[string]string{"X-Hub-Signature-256": "sha256=zz"}).Status)

	// Deliveries: newest first, with status, outcome, size and hash, never the body.
	d := w.expect(t, http.StatusOK, http.MethodGet, whkPath+"/gh-push/deliveries", w.adm, nil)
	var outcomes []string
	for _, it := range d.items() {
		outcomes = append(outcomes, it["outcome"].(string)+"/"+strconv.Itoa(int(it["status_code"].(float64))))
		require.NotContains(t, it, "body")
	}
	require.Equal(t, []string{"unauthorized/401", "unauthorized/401", "unauthorized/401", "unauthorized/401", "replayed/401",
		"accepted/202", "redelivered/202", "accepted/202"}, outcomes)
	first := d.items()[len(d.items())-1]
	require.EqualValues(t, len(body), first["body_bytes"])
	require.Equal(t, hexSHA(body), first["body_sha256"])
	require.Equal(t, inv, first["invocation_id"])
	require.Equal(t, "127.0.0.1", first["source_ip"])

	// Filtered and paged like every list.
	d = w.expect(t, http.StatusOK, http.MethodGet, whkPath+"/gh-push/deliveries?$filter=status_code%20eq%20202&limit=2", w.adm, nil)
	require.Len(t, d.items(), 2)
	require.Equal(t, true, at(d.Body, "page_info")["has_more"])
}

func hexSHA(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestWebhookTimestampedSignatures(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	st := w.create(t, obj{"webhook_trigger_id": "stripe", "authentication": obj{"type": "hmac_sha256", "format": "stripe"}, "forward_headers": []any{}})
	sl := w.create(t, obj{"webhook_trigger_id": "slack", "authentication": obj{"type": "hmac_sha256", "format": "slack", "timestamp_tolerance_seconds": 60}})
	gen := w.create(t, obj{"webhook_trigger_id": "gen", "authentication": obj{"type": "hmac_sha256", "format": "generic",
		"header": "X-Signature", "signature_prefix": "sha256=", "signature_encoding": "base64", "timestamp_header": "X-Timestamp"}})
	require.EqualValues(t, 300, at(st, "authentication")["timestamp_tolerance_seconds"])
	now := w.clk.Now()
	body := `{"type":"invoice.paid"}`

	// Stripe: good, then the identical request replayed, then timestamps out of tolerance.
	good := stripe(st["secret"].(string), body, now.Add(-10*time.Second))
	require.Equal(t, http.StatusAccepted, w.deliver(t, "stripe", body, good).Status)
	r := w.deliver(t, "stripe", body, good)
	require.Equal(t, http.StatusUnauthorized, r.Status, "an identical signed request is a replay: %s", r)
	r = w.deliver(t, "stripe", body, stripe(st["secret"].(string), body, now.Add(-301*time.Second)))
	require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r)
	require.Contains(t, r.Body["detail"], "timestamp")
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "stripe", body, stripe(st["secret"].(string), body, now.Add(301*time.Second))).Status)
	// A replayed timestamp with a recomputed signature by someone without the secret: 401.
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "stripe", body, stripe("whsec_forged-forged-forged", body, now)).Status)
	// Stripe signs once per secret: any v1 may match.
	two := stripe(st["secret"].(string), `{"n":2}`, now)
	two["Stripe-Signature"] = strings.Replace(two["Stripe-Signature"], ",v1=", ",v1="+strings.Repeat("ab", 32)+",v1=", 1)
	require.Equal(t, http.StatusAccepted, w.deliver(t, "stripe", `{"n":2}`, two).Status)

	// Slack, with a 60 s tolerance.
	require.Equal(t, http.StatusAccepted, w.deliver(t, "slack", body, slack(sl["secret"].(string), body, now)).Status)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "slack", body, slack(sl["secret"].(string), body, now.Add(-61*time.Second))).Status)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "slack", "x"+body, slack(sl["secret"].(string), body, now)).Status)

	// Generic: base64 signature over "<ts>.<body>".
	ts := strconv.FormatInt(now.Unix(), 10)
	m := hmac.New(sha256.New, []byte(gen["secret"].(string)))
	m.Write([]byte(ts + "." + body))
	sig := "sha256=" + base64.StdEncoding.EncodeToString(m.Sum(nil))
	require.Equal(t, http.StatusAccepted, w.deliver(t, "gen", body, map[string]string{"X-Signature": sig, "X-Timestamp": ts}).Status)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "gen", body, map[string]string{"X-Signature": sig, "X-Timestamp": ts}).Status)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "gen", body, map[string]string{"X-Signature": sig}).Status)

	// After the tolerance has passed, the stripe request is refused for its timestamp (and its
	// replay memory may go).
	w.clk.Advance(10 * time.Minute)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "stripe", body, good).Status)
}

func TestWebhookSchemes(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	sha1Hook := w.create(t, obj{"webhook_trigger_id": "gh1", "authentication": obj{"type": "hmac_sha1", "format": "github"}})
	basic := w.create(t, obj{"webhook_trigger_id": "basic", "authentication": obj{"type": "basic", "username": "sender"}})
	bearer := w.create(t, obj{"webhook_trigger_id": "bearer", "authentication": obj{"type": "bearer"}})
	keyH := w.create(t, obj{"webhook_trigger_id": "key-h", "authentication": obj{"type": "api_key", "header": "X-Token"}})
	keyQ := w.create(t, obj{"webhook_trigger_id": "key-q", "authentication": obj{"type": "api_key", "query_param": "key"}})
	none := w.create(t, obj{"webhook_trigger_id": "open", "authentication": obj{"type": "none"}})
	require.NotContains(t, none, "secret")

	ok := func(r *resp) { t.Helper(); require.Equal(t, http.StatusAccepted, r.Status, "%s", r) }
	no := func(r *resp) { t.Helper(); require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r) }
	body := `{"a":1}`

	s1 := sha1Hook["secret"].(string)
	ok(w.deliver(t, "gh1", body, map[string]string{"X-Hub-Signature": "sha1=" + macHex(sha1.New, s1, body)}))
	no(w.deliver(t, "gh1", `{"a":2}`, map[string]string{"X-Hub-Signature": "sha1=" + macHex(sha1.New, "wrong", `{"a":2}`)}))

	basicAuth := func(u, p string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p))}
	}
	ok(w.deliver(t, "basic", body, basicAuth("sender", basic["secret"].(string))))
	ok(w.deliver(t, "basic", body, basicAuth("sender", basic["secret"].(string))))
	no(w.deliver(t, "basic", body, basicAuth("other", basic["secret"].(string))))
	no(w.deliver(t, "basic", body, basicAuth("sender", "wrong")))
	no(w.deliver(t, "basic", body, nil))

	ok(w.deliver(t, "bearer", body, map[string]string{"Authorization": "Bearer " + bearer["secret"].(string)}))
	no(w.deliver(t, "bearer", body, map[string]string{"Authorization": "Bearer " + bearer["secret"].(string) + "x"}))
	no(w.deliver(t, "bearer", body, map[string]string{"Authorization": "Bearer " + w.adm}))

	ok(w.deliver(t, "key-h", body, map[string]string{"X-Token": keyH["secret"].(string)}))
	no(w.deliver(t, "key-h", body, map[string]string{"X-API-Key": keyH["secret"].(string)}))
	r := w.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/key-q?key=" + keyQ["secret"].(string) + "&event=x", body: body})
	ok(r)
	rec := w.expect(t, http.StatusOK, http.MethodGet, base+"/invocations/"+r.Body["invocation_id"].(string), w.adm, nil).Body
	require.Equal(t, obj{"event": "x"}, at(rec, "params")["query"], "the api key is never passed on")
	no(w.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/key-q?key=nope", body: body}))

	ok(w.deliver(t, "open", "plain text", nil))
}

func TestWebhookRegenerateOverlap(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	old := w.create(t, obj{"webhook_trigger_id": "rot", "authentication": obj{"type": "bearer"}})["secret"].(string)
	bearer := func(s string) map[string]string { return map[string]string{"Authorization": "Bearer " + s} }

	w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath+"/rot:regenerate-secret", w.adm, obj{"overlap_seconds": 8 * 24 * 3600})
	r := w.expect(t, http.StatusOK, http.MethodPost, whkPath+"/rot:regenerate-secret", w.adm, obj{"overlap_seconds": 3600})
	fresh := r.Body["secret"].(string)
	require.NotEqual(t, old, fresh)
	require.EqualValues(t, 2, r.Body["secret_generation"])
	require.Equal(t, w.clk.Now().Add(time.Hour).Format(time.RFC3339), r.Body["previous_secret_expires_at"])

	require.Equal(t, http.StatusAccepted, w.deliver(t, "rot", "{}", bearer(old)).Status, "the old secret is valid during the overlap")
	require.Equal(t, http.StatusAccepted, w.deliver(t, "rot", "{}", bearer(fresh)).Status)
	w.clk.Advance(time.Hour - time.Second)
	require.Equal(t, http.StatusAccepted, w.deliver(t, "rot", "{}", bearer(old)).Status)
	w.clk.Advance(time.Second)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "rot", "{}", bearer(old)).Status, "the overlap is over")
	require.Equal(t, http.StatusAccepted, w.deliver(t, "rot", "{}", bearer(fresh)).Status)

	// A secret the sender generated (Stripe does); overlap 0 ends the previous one at once.
	given := "sk_sender_generated_0123456789"
	r = w.expect(t, http.StatusOK, http.MethodPost, whkPath+"/rot:regenerate-secret", w.adm, obj{"overlap_seconds": 0, "secret": given})
	require.Equal(t, given, r.Body["secret"])
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "rot", "{}", bearer(fresh)).Status)
	require.Equal(t, http.StatusAccepted, w.deliver(t, "rot", "{}", bearer(given)).Status)
	w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath+"/rot:regenerate-secret", w.adm, obj{"secret": "short"})

	// A trigger without authentication has no secret to regenerate.
	w.create(t, obj{"webhook_trigger_id": "open", "authentication": obj{"type": "none"}})
	w.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, whkPath+"/open:regenerate-secret", w.adm, nil)
}

func TestWebhookNotFoundIsIndistinguishable(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	w.create(t, obj{"webhook_trigger_id": "hook", "authentication": obj{"type": "none"}})
	w.create(t, obj{"webhook_trigger_id": "off", "authentication": obj{"type": "none"}, "status": "disabled"})
	other := invTenant(t, w.env, "globex")
	_ = other
	w.enable(t, "sleepy", nil)
	w.expect(t, http.StatusOK, http.MethodPost, tenantPath("sleepy")+":disable", operator, nil)

	strip := func(r *resp) obj {
		b := obj{}
		for k, v := range r.Body {
			if k != "instance" && k != "trace_id" {
				b[k] = v
			}
		}
		return b
	}
	var bodies []obj
	for _, p := range []string{"nobody/hook", "acme/nothing", "acme/off", "globex/hook", "sleepy/hook"} {
		r := w.send(t, request{method: http.MethodPost, path: base + "/webhooks/" + p, body: "{}"})
		require.Equal(t, http.StatusNotFound, r.Status, "%s: %s", p, r)
		require.Empty(t, r.Header.Get("WWW-Authenticate"))
		bodies = append(bodies, strip(r))
	}
	for _, b := range bodies[1:] {
		require.Equal(t, bodies[0], b)
	}
	// No bearer token is needed, and one is not looked at.
	require.Equal(t, http.StatusAccepted, w.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/hook", body: "{}", token: "garbage"}).Status)

	// :enable brings the disabled one back; :disable stops it again.
	w.expect(t, http.StatusOK, http.MethodPost, whkPath+"/off:enable", w.adm, nil)
	require.Equal(t, http.StatusAccepted, w.deliver(t, "off", "{}", nil).Status)
	w.expect(t, http.StatusOK, http.MethodPost, whkPath+"/off:disable", w.adm, nil)
	require.Equal(t, http.StatusNotFound, w.deliver(t, "off", "{}", nil).Status)
}

func TestWebhookAllowedSources(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t, func(c *server.Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	w.create(t, obj{"webhook_trigger_id": "gh", "authentication": obj{"type": "none"}, "allowed_sources": []any{"192.30.252.0/22"}})
	r := w.deliver(t, "gh", "{}", nil)
	require.Equal(t, http.StatusForbidden, r.Status, "the peer 127.0.0.1 is outside the allowlist: %s", r)
	require.Equal(t, http.StatusAccepted, w.deliver(t, "gh", "{}", map[string]string{"X-Forwarded-For": "192.30.252.7"}).Status,
		"a trusted proxy's X-Forwarded-For names the sender")
	require.Equal(t, http.StatusForbidden, w.deliver(t, "gh", "{}", map[string]string{"X-Forwarded-For": "192.30.252.7, 10.9.9.9"}).Status,
		"the right-most untrusted hop is the sender; what it claims further left is not believed")
	d := w.expect(t, http.StatusOK, http.MethodGet, whkPath+"/gh/deliveries", w.adm, nil).items()
	require.Equal(t, "source_not_allowed", d[0]["outcome"])
	require.Equal(t, "10.9.9.9", d[0]["source_ip"])

	for _, bad := range []any{"300.1.1.1/8", "example.com", "10.0.0.0/33"} {
		r := w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, w.adm,
			obj{"entrypoint_id": hookFn, "authentication": obj{"type": "none"}, "allowed_sources": []any{"10.0.0.0/8", bad}})
		requireIssue(t, r, "$.allowed_sources[1]", "INVALID_VALUE")
	}
}

func TestWebhookAllowedSourcesPeerOnly(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	w.create(t, obj{"webhook_trigger_id": "gh", "authentication": obj{"type": "none"}, "allowed_sources": []any{"192.30.252.0/22"}})
	require.Equal(t, http.StatusForbidden, w.deliver(t, "gh", "{}", map[string]string{"X-Forwarded-For": "192.30.252.7"}).Status,
		"without trusted proxies, X-Forwarded-For is ignored")
}

func TestWebhookLimits(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	w.create(t, obj{"webhook_trigger_id": "small", "authentication": obj{"type": "none"}, "max_body_bytes": 100,
		"rate_limit": obj{"max_requests_per_second": 1, "burst_size": 2}})

	r := w.deliver(t, "small", `"`+strings.Repeat("x", 99)+`"`, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.Status, "%s", r)
	// Without Content-Length (chunked), the limit holds too.
	req, err := http.NewRequest(http.MethodPost, w.ts.URL+base+"/webhooks/acme/small", io.MultiReader(strings.NewReader(strings.Repeat("y", 150))))
	require.NoError(t, err)
	res, err := w.client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	// Over the server's cap: refused before anything is read.
	big := w.deliver(t, "small", strings.Repeat("z", 2<<20+1), nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, big.Status)

	require.Equal(t, http.StatusAccepted, w.deliver(t, "small", "{}", nil).Status)
	require.Equal(t, http.StatusAccepted, w.deliver(t, "small", "{}", nil).Status)
	r = w.deliver(t, "small", "{}", nil)
	require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r)
	require.Equal(t, "rate_limited", problemKind(r))
	require.Equal(t, "1", r.Header.Get("Retry-After"))
	w.clk.Advance(time.Second)
	require.Equal(t, http.StatusAccepted, w.deliver(t, "small", "{}", nil).Status)

	// An idempotency key has a bound too.
	r = w.deliver(t, "small", "{}", map[string]string{"Idempotency-Key": strings.Repeat("k", 257)})
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r)

	many := func(n int, f func(i int) string) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	for _, body := range []obj{
		{"max_body_bytes": 2<<20 + 1}, {"max_body_bytes": 0}, {"rate_limit": obj{"max_requests_per_second": 0}},
		{"rate_limit": obj{"max_requests_per_second": 1001}}, {"rate_limit": obj{"max_requests_per_second": 1, "burst_size": 10001}},
		{"forward_headers": []any{"Authorization"}}, {"forward_headers": []any{"X-Hub-Signature-256"}}, {"name": strings.Repeat("n", 257)},
		{"allowed_sources": many(65, func(i int) string { return fmt.Sprintf("10.0.%d.0/24", i) })},
		{"forward_headers": many(33, func(i int) string { return fmt.Sprintf("X-H%d", i) })},
		{"execution_context": "root"}, {"status": "paused"},
	} {
		body["entrypoint_id"], body["authentication"] = hookFn, obj{"type": "none"}
		if _, ok := body["forward_headers"]; ok && len(body["forward_headers"].([]any)) == 1 && body["forward_headers"].([]any)[0] == "X-Hub-Signature-256" {
			body["authentication"] = obj{"type": "hmac_sha256", "format": "github"}
		}
		w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, w.adm, body)
	}
}

func TestWebhookPayloadSchema(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	w.create(t, obj{"webhook_trigger_id": "typed", "authentication": obj{"type": "none"},
		"payload_schema": obj{"type": "object", "required": []any{"action"}, "properties": obj{"action": obj{"type": "string"}}}})
	require.Equal(t, http.StatusAccepted, w.deliver(t, "typed", `{"action":"opened"}`, nil).Status)
	r := w.deliver(t, "typed", `{"action":3}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
	requireIssue(t, r, "$.body.action", "SCHEMA_MISMATCH")
	r = w.deliver(t, "typed", `not json`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
	requireIssue(t, r, "$.body", "SCHEMA_MISMATCH")

	// A schema that is not one, or over the user-schema limits, is refused at creation.
	r = w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, w.adm,
		obj{"entrypoint_id": hookFn, "authentication": obj{"type": "none"}, "payload_schema": obj{"type": "nonsense"}})
	require.NotEmpty(t, r.errors())
	deep := obj{"type": "object"}
	for i := 0; i < 40; i++ {
		deep = obj{"allOf": []any{deep}}
	}
	w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, w.adm,
		obj{"entrypoint_id": hookFn, "authentication": obj{"type": "none"}, "payload_schema": deep})
}

func TestWebhookWithoutMasterKey(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t, func(c *server.Config) { c.Keyring = nil })
	r := w.expectProblem(t, http.StatusServiceUnavailable, "unavailable", http.MethodPost, whkPath, w.adm,
		obj{"entrypoint_id": hookFn, "authentication": obj{"type": "hmac_sha256", "format": "github"}})
	require.Equal(t, "no_master_key", r.Body["reason"])
	w.create(t, obj{"webhook_trigger_id": "open", "authentication": obj{"type": "none"}})
	require.Equal(t, http.StatusAccepted, w.deliver(t, "open", "{}", nil).Status)
}

func TestWebhookCRUD(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	w.enable(t, "acme", obj{"quotas": obj{"max_triggers": 3}})
	viewer := w.token(t, "acme", "vic", "viewer")
	dev := w.token(t, "acme", "dev", "developer")
	globex := invTenant(t, w.env, "globex")

	created := w.create(t, obj{"authentication": obj{"type": "bearer"}, "name": "ci"})
	id := created["webhook_trigger_id"].(string)
	require.True(t, strings.HasPrefix(id, "whk"), id)
	require.Equal(t, "active", created["status"])
	require.Equal(t, "system", created["execution_context"])
	secret := created["secret"].(string)

	// GET never shows the secret.
	got := w.expect(t, http.StatusOK, http.MethodGet, whkPath+"/"+id, viewer, nil)
	require.NotContains(t, got.Body, "secret")
	require.NotContains(t, string(got.Raw), secret)

	// Roles, tenants, entrypoints.
	w.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, whkPath, viewer, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "none"}})
	w.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, whkPath+"/"+id, globex, nil)
	w.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, whkPath+"/"+id, globex, nil)
	w.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, whkPath+"/"+id+"/deliveries", globex, nil)
	w.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, whkPath, globex, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "none"}})
	w.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, whkPath, dev, obj{"entrypoint_id": fnPrefix + "vendor.app.hooks.nothing.v1~", "authentication": obj{"type": "none"}})
	w.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, whkPath, dev, obj{"webhook_trigger_id": id, "entrypoint_id": hookFn, "authentication": obj{"type": "none"}})
	r := w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, dev, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "md5"}})
	requireIssue(t, r, "$.authentication.type", "INVALID_VALUE")
	r = w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, dev, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "hmac_sha256", "signature_prefix": "sha256="}})
	requireIssue(t, r, "$.authentication.header", "MISSING_FIELD")
	w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, dev, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "hmac_sha1", "format": "stripe"}})
	w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, dev, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "none"}, "surprise": 1})
	r = w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, dev, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "bearer", "secret_ref": "x"}})
	requireIssue(t, r, "$.authentication.secret_ref", "INVALID_VALUE")
	r = w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, dev, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "bearer", "username": "u"}})
	requireIssue(t, r, "$.authentication.username", "INVALID_VALUE")

	// PATCH and PUT; the response of a change never shows the secret, and the secret survives.
	p := w.expect(t, http.StatusOK, http.MethodPatch, whkPath+"/"+id, dev, obj{"name": "ci-2", "forward_headers": []any{"X-Request-Id"}})
	require.Equal(t, "ci-2", p.Body["name"])
	require.Equal(t, []any{"X-Request-Id"}, p.Body["forward_headers"])
	require.NotContains(t, p.Body, "secret")
	put := got.Body
	put["name"] = "ci-3"
	p = w.expect(t, http.StatusOK, http.MethodPut, whkPath+"/"+id, dev, put)
	require.Equal(t, "ci-3", p.Body["name"])
	require.Equal(t, http.StatusAccepted, w.deliver(t, id, "{}", map[string]string{"Authorization": "Bearer " + secret}).Status)
	w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPatch, whkPath+"/"+id, dev, obj{"secret": "x-new-secret-0123456789"})
	w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPatch, whkPath+"/"+id, dev, obj{"webhook_trigger_id": "other"})
	// Switching from none to a scheme with a secret generates one (shown in that answer).
	open := w.create(t, obj{"webhook_trigger_id": "open", "authentication": obj{"type": "none"}})
	require.NotContains(t, open, "secret")
	p = w.expect(t, http.StatusOK, http.MethodPatch, whkPath+"/open", dev, obj{"authentication": obj{"type": "api_key"}})
	require.NotEmpty(t, p.Body["secret"])
	require.Equal(t, http.StatusAccepted, w.deliver(t, "open", "{}", map[string]string{"X-API-Key": p.Body["secret"].(string)}).Status)

	// The quota (max_triggers: webhook triggers count there).
	w.create(t, obj{"webhook_trigger_id": "third", "authentication": obj{"type": "none"}})
	r = w.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, whkPath, dev, obj{"entrypoint_id": hookFn, "authentication": obj{"type": "none"}})
	require.Equal(t, "max_triggers", r.Body["quota"])
	u := w.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/acme/usage", w.adm, nil)
	require.EqualValues(t, 3, at(u.Body, "current")["total_triggers"])
	require.Equal(t, "60", r.Header.Get("Retry-After"))

	// List: 000 paging and $filter.
	l := w.expect(t, http.StatusOK, http.MethodGet, whkPath+"?limit=2", viewer, nil)
	require.Len(t, l.items(), 2)
	require.Equal(t, true, at(l.Body, "page_info")["has_more"])
	l = w.expect(t, http.StatusOK, http.MethodGet, whkPath+"?limit=2&cursor="+at(l.Body, "page_info")["next_cursor"].(string), viewer, nil)
	require.Len(t, l.items(), 1)
	l = w.expect(t, http.StatusOK, http.MethodGet, whkPath+"?$filter=webhook_trigger_id%20eq%20'open'", viewer, nil)
	require.Equal(t, []string{"open"}, []string{l.items()[0]["webhook_trigger_id"].(string)})
	require.NotContains(t, string(l.Raw), "\"secret\"")
	w.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, whkPath+"?$filter=secret%20eq%20'x'", viewer, nil)

	// :disable, :enable, :regenerate-secret (each audited).
	w.expect(t, http.StatusOK, http.MethodPost, whkPath+"/"+id+":disable", dev, nil)
	w.expect(t, http.StatusOK, http.MethodPost, whkPath+"/"+id+":enable", dev, nil)
	regen := w.expect(t, http.StatusOK, http.MethodPost, whkPath+"/"+id+":regenerate-secret", dev, nil).Body["secret"].(string)
	w.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, whkPath+"/"+id+":regenerate-secret", viewer, nil)

	// Delete: the receiver then answers 404; the quota has room again.
	d := w.expect(t, http.StatusOK, http.MethodDelete, whkPath+"/"+id, dev, nil)
	require.Equal(t, id, d.Body["webhook_trigger_id"])
	require.Equal(t, http.StatusNotFound, w.deliver(t, id, "{}", map[string]string{"Authorization": "Bearer " + secret}).Status)
	w.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, whkPath+"/"+id, dev, nil)
	w.create(t, obj{"webhook_trigger_id": "fourth", "authentication": obj{"type": "none"}})

	// Audit: every change, never the secret.
	a := w.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?limit=200", w.adm, nil)
	var types []string
	for _, ev := range a.items() {
		if ev["resource_type"] == "webhook_trigger" {
			types = append(types, strings.TrimSuffix(strings.TrimPrefix(ev["type"].(string), auditBase), ".v1~"))
		}
	}
	require.Subset(t, types, []string{"webhook_created", "webhook_updated", "webhook_deleted", "webhook_secret_regenerated",
		"webhook_enabled", "webhook_disabled"})
	require.NotContains(t, string(a.Raw), secret)
	require.NotContains(t, string(a.Raw), p.Body["secret"].(string))
	require.NotContains(t, string(a.Raw), regen)
}

// TestWebhookSecretNeverLeaks drives every operation that touches secrets, then looks for them in
// every GET answer, the audit log, the server's log and the database files.
func TestWebhookSecretNeverLeaks(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	var secrets []string
	for _, a := range []obj{{"type": "hmac_sha256", "format": "github"}, {"type": "basic"}, {"type": "bearer"}, {"type": "api_key", "query_param": "k"}} {
		c := w.create(t, obj{"authentication": a})
		secrets = append(secrets, c["secret"].(string))
		id := c["webhook_trigger_id"].(string)
		r := w.expect(t, http.StatusOK, http.MethodPost, whkPath+"/"+id+":regenerate-secret", w.adm, nil)
		secrets = append(secrets, r.Body["secret"].(string))
		if a["type"] == "api_key" {
			require.Equal(t, http.StatusAccepted, w.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/" + id + "?k=" + secrets[len(secrets)-1], body: "{}"}).Status)
		}
		if a["type"] == "bearer" {
			require.Equal(t, http.StatusUnauthorized, w.deliver(t, id, "{}", map[string]string{"Authorization": "Bearer " + secrets[len(secrets)-1] + "x"}).Status)
			require.Equal(t, http.StatusAccepted, w.deliver(t, id, "{}", map[string]string{"Authorization": "Bearer " + secrets[len(secrets)-1]}).Status)
		}
	}
	var seen bytes.Buffer
	for _, p := range []string{whkPath, base + "/audit-events?limit=200", base + "/invocations?limit=200"} {
		seen.Write(w.expect(t, http.StatusOK, http.MethodGet, p, w.adm, nil).Raw)
	}
	l := w.expect(t, http.StatusOK, http.MethodGet, whkPath, w.adm, nil)
	for _, it := range l.items() {
		seen.Write(w.expect(t, http.StatusOK, http.MethodGet, whkPath+"/"+it["webhook_trigger_id"].(string), w.adm, nil).Raw)
		seen.Write(w.expect(t, http.StatusOK, http.MethodGet, whkPath+"/"+it["webhook_trigger_id"].(string)+"/deliveries", w.adm, nil).Raw)
	}
	seen.WriteString(w.logs.String())
	if w.store != "" {
		// PostgreSQL: every row of the server's schema, sealed values as their raw bytes.
		rows := pgtest.Contents(t, w.store)
		require.NotEmpty(t, rows["webhook_secrets"], "the sealed secrets were read")
		for _, b := range rows {
			seen.Write(b)
		}
	} else {
		files, err := filepath.Glob(filepath.Join(w.dir, "lark.db*"))
		require.NoError(t, err)
		require.NotEmpty(t, files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			seen.Write(b)
		}
	}
	for _, s := range secrets {
		require.NotContains(t, seen.String(), s)
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		require.NoError(t, err)
		require.False(t, bytes.Contains(seen.Bytes(), raw), "the secret's bytes are stored in plaintext")
	}
}

// TestWebhookReplayRace sends the same signed request many times at once: exactly one is accepted
// (the replay memory is written in the delivery's transaction, not only checked before it).
func TestWebhookReplayRace(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	st := w.create(t, obj{"webhook_trigger_id": "stripe", "authentication": obj{"type": "hmac_sha256", "format": "stripe"},
		"rate_limit": obj{"max_requests_per_second": 1000, "burst_size": 1000}})
	body := `{"id":"evt_1"}`
	h := stripe(st["secret"].(string), body, w.clk.Now())
	const n = 16
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- w.deliver(t, "stripe", body, h).Status
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusUnauthorized: n - 1}, count)
	l := w.expect(t, http.StatusOK, http.MethodGet, base+"/invocations?limit=200", w.adm, nil)
	require.Len(t, l.items(), 1, "one invocation")
}

// TestWebhookReplayAcrossRestart: the replay memory and the idempotency keys are durable.
func TestWebhookReplayAcrossRestart(t *testing.T) {
	t.Parallel()
	dir, st := t.TempDir(), testStore(t)
	clk := clock.NewFake(time.Date(2026, 1, 27, 10, 0, 0, 0, time.UTC))
	setting, err := keyring.Generate()
	require.NoError(t, err)
	kr, err := keyring.Parse(setting)
	require.NoError(t, err)
	cfg := func() server.Config {
		return server.Config{DataDir: dir, Store: st, AdminToken: operator, MaxInFlight: 256, Clock: clk, Keyring: kr}
	}
	// The first server is closed by the test (a restart), not by the harness.
	srv, err := server.New(context.Background(), cfg())
	require.NoError(t, err)
	ts := httptest.NewServer(checked(t, srv.Handler()))
	e := &env{srv: srv, ts: ts, client: ts.Client()}
	adm := invTenant(t, e, "acme")
	e.registerActive(t, adm, invFn(t, "hooks.receive.v1~", "def main(ctx, input):\n    return {}\n",
		set("traits.invocation", obj{"supported": []any{"async"}, "default": "async"})))
	secret := e.expect(t, http.StatusCreated, http.MethodPost, whkPath, adm,
		obj{"webhook_trigger_id": "gh", "entrypoint_id": hookFn, "authentication": obj{"type": "hmac_sha256", "format": "github"}}).Body["secret"].(string)
	body := `{"n":1}`
	send := func(e *env, hdr map[string]string) *resp {
		return e.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/gh", body: body, header: hdr})
	}
	signed := github(secret, body)
	require.Equal(t, http.StatusAccepted, send(e, signed).Status)
	ts.Close()
	require.NoError(t, srv.Close())

	e = newEnv(t, func(c *server.Config) { *c = cfg() })
	require.Equal(t, http.StatusUnauthorized, send(e, signed).Status, "a replay after a restart is still refused")
	// The secret still opens after the restart (sealed under the same master key).
	other := `{"n":2}`
	r := e.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/gh", body: other, header: github(secret, other)})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
}

// TestWebhookMasterKeyRotation: secrets sealed under an old master key are rewrapped at start when
// the new key comes first ("NEW,OLD"), so a server with only the new key still opens them.
func TestWebhookMasterKeyRotation(t *testing.T) {
	t.Parallel()
	dir, st := t.TempDir(), testStore(t)
	clk := clock.NewFake(time.Date(2026, 1, 27, 10, 0, 0, 0, time.UTC))
	oldKey, err := keyring.Generate()
	require.NoError(t, err)
	newKey, err := keyring.Generate()
	require.NoError(t, err)
	run := func(setting string, fn func(e *env)) {
		var kr *keyring.Keyring
		if setting != "" {
			kr, err = keyring.Parse(setting)
			require.NoError(t, err)
		}
		srv, err := server.New(context.Background(), server.Config{DataDir: dir, Store: st, AdminToken: operator, MaxInFlight: 256, Clock: clk, Keyring: kr})
		require.NoError(t, err)
		ts := httptest.NewServer(checked(t, srv.Handler()))
		fn(&env{srv: srv, ts: ts, client: ts.Client()})
		ts.Close()
		require.NoError(t, srv.Close())
	}
	var secret string
	deliver := func(e *env) *resp {
		return e.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/rot", body: "{}",
			header: map[string]string{"Authorization": "Bearer " + secret}})
	}
	run(oldKey, func(e *env) {
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, invFn(t, "hooks.receive.v1~", "def main(ctx, input):\n    return {}\n",
			set("traits.invocation", obj{"supported": []any{"async"}, "default": "async"})))
		secret = e.expect(t, http.StatusCreated, http.MethodPost, whkPath, adm,
			obj{"webhook_trigger_id": "rot", "entrypoint_id": hookFn, "authentication": obj{"type": "bearer"}}).Body["secret"].(string)
		require.Equal(t, http.StatusAccepted, deliver(e).Status)
	})
	run(newKey+","+oldKey, func(e *env) { require.Equal(t, http.StatusAccepted, deliver(e).Status) })
	run(newKey, func(e *env) {
		r := deliver(e)
		require.Equal(t, http.StatusAccepted, r.Status, "the secret was rewrapped under the new key: %s", r)
	})
	run("", func(e *env) {
		r := deliver(e)
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "without a master key the secret cannot be opened: %s", r)
		require.Equal(t, "no_master_key", r.Body["reason"])
	})
}

// TestWebhookWrongMasterKey: webhook secrets follow the tenant secrets' rule
// (server.TestWrongMasterKeyStopsTheStart): under a key that is not configured they stop the start,
// unless AllowUnreadableSecrets, when the server starts and their triggers answer 503 until the
// right key is back.
func TestWebhookWrongMasterKey(t *testing.T) {
	t.Parallel()
	dir, st := t.TempDir(), testStore(t)
	right, err := keyring.Generate()
	require.NoError(t, err)
	wrong, err := keyring.Generate()
	require.NoError(t, err)
	start := func(setting string, allow bool) (*server.Server, error) {
		kr, err := keyring.Parse(setting)
		require.NoError(t, err)
		return server.New(context.Background(), server.Config{DataDir: dir, Store: st, AdminToken: operator, MaxInFlight: 256,
			Keyring: kr, AllowUnreadableSecrets: allow})
	}
	run := func(srv *server.Server, fn func(e *env)) {
		ts := httptest.NewServer(checked(t, srv.Handler()))
		fn(&env{srv: srv, ts: ts, client: ts.Client()})
		ts.Close()
		require.NoError(t, srv.Close())
	}
	var secret string
	deliver := func(e *env) *resp {
		return e.send(t, request{method: http.MethodPost, path: base + "/webhooks/acme/wk", body: "{}",
			header: map[string]string{"Authorization": "Bearer " + secret}})
	}
	srv, err := start(right, false)
	require.NoError(t, err)
	run(srv, func(e *env) {
		adm := invTenant(t, e, "acme")
		e.registerActive(t, adm, invFn(t, "hooks.receive.v1~", "def main(ctx, input):\n    return {}\n",
			set("traits.invocation", obj{"supported": []any{"async"}, "default": "async"})))
		secret = e.expect(t, http.StatusCreated, http.MethodPost, whkPath, adm,
			obj{"webhook_trigger_id": "wk", "entrypoint_id": hookFn, "authentication": obj{"type": "bearer"}}).Body["secret"].(string)
	})
	_, err = start(wrong, false)
	require.Error(t, err)
	require.Contains(t, err.Error(), "webhook secrets: 1 stored values cannot be opened")
	srv, err = start(wrong, true)
	require.NoError(t, err)
	run(srv, func(e *env) { require.Equal(t, http.StatusServiceUnavailable, deliver(e).Status) })
	srv, err = start(right, false)
	require.NoError(t, err)
	run(srv, func(e *env) { require.Equal(t, http.StatusAccepted, deliver(e).Status) })
}

// TestWebhookStartsWorkflowThatWaitsForApproval is issue 17's end-to-end case: a GitHub-style
// signed delivery starts a workflow, which waits for an approval event; the event arrives through
// POST /events and completes it. A forged signature, a replayed request and a source outside the
// CIDR start nothing.
func TestWebhookStartsWorkflowThatWaitsForApproval(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t, func(c *server.Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	invDispatcher(t, w.env)
	wf := w.registerActive(t, w.adm, wfBody(t, "pr_approval.v1~", fmt.Sprintf(`
def main(ctx, input):
    pr = input["body"]["pull_request"]["number"]
    f = 'payload.pr == ' + str(pr)
    ev = r_await(r_wait_event_v1(%q, event_filter_query=f, timeout_ms=3600000))
    return {"pr": pr, "event": ev.value["event_id"], "github_event": input["headers"]["x-github-event"]}
`, approvalType)))
	hook := w.create(t, obj{"webhook_trigger_id": "gh-pr", "entrypoint_id": wf["entrypoint_id"],
		"authentication": obj{"type": "hmac_sha256", "format": "github"}, "allowed_sources": []any{"192.30.252.0/22"}})
	secret := hook["secret"].(string)
	body := `{"action":"opened","pull_request":{"number":42}}`
	from := func(h map[string]string) map[string]string {
		h["X-Forwarded-For"] = "192.30.252.10"
		return h
	}

	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "gh-pr", body, from(github("whsec_forged-forged-forged-forged", body))).Status)
	require.Equal(t, http.StatusForbidden, w.deliver(t, "gh-pr", body, github(secret, body)).Status, "from 127.0.0.1, outside the CIDR")
	r := w.deliver(t, "gh-pr", body, from(github(secret, body)))
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	id := r.Body["invocation_id"].(string)
	require.Equal(t, http.StatusUnauthorized, w.deliver(t, "gh-pr", body, from(github(secret, body))).Status, "the replay")

	invWait(t, w.env, w.adm, id, "suspended")
	p := publish(t, w.env, w.adm, http.StatusAccepted, obj{"event_id": "approve-42", "event_type_id": approvalType, "payload": obj{"pr": 42}})
	require.Equal(t, 1.0, p.Body["delivered"], "%s", p)
	done := invWait(t, w.env, w.adm, id, wfTerminal...)
	require.Equal(t, "succeeded", done["status"], "%v", done)
	require.Equal(t, obj{"pr": 42.0, "event": "approve-42", "github_event": "push"}, done["result"])

	l := w.expect(t, http.StatusOK, http.MethodGet, base+"/invocations?limit=200", w.adm, nil)
	require.Len(t, l.items(), 1, "only the accepted delivery started anything")
}

// TestWebhookPrivacy: a trigger that runs as its creator on the creator's private entrypoint does not
// exist for the tenant's other developers; one on a tenant entrypoint is visible to them but only its
// creator or an admin may change it; a system trigger cannot name a private entrypoint.
func TestWebhookPrivacy(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	alice := w.token(t, "acme", "alice", "developer")
	bob := w.token(t, "acme", "bob", "developer")
	private := w.registerActive(t, alice, invFn(t, "hooks.private.v1~", "def main(ctx, input):\n    return {}\n", del("owner"),
		set("traits.invocation", obj{"supported": []any{"async"}, "default": "async"})))
	privID := private["entrypoint_id"].(string)

	// Alice sees her entrypoint, so the refusal names its cause: the system context.
	r := w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, alice,
		obj{"webhook_trigger_id": "sys-private", "entrypoint_id": privID, "authentication": obj{"type": "none"}})
	requireIssue(t, r, "$.execution_context", "ENTRYPOINT_NOT_VISIBLE")
	w.expect(t, http.StatusCreated, http.MethodPost, whkPath, alice,
		obj{"webhook_trigger_id": "alice-private", "entrypoint_id": privID, "authentication": obj{"type": "none"}, "execution_context": "user"})
	w.expect(t, http.StatusCreated, http.MethodPost, whkPath, alice,
		obj{"webhook_trigger_id": "alice-team", "entrypoint_id": hookFn, "authentication": obj{"type": "none"}, "execution_context": "user"})
	w.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, whkPath, bob,
		obj{"entrypoint_id": privID, "authentication": obj{"type": "none"}, "execution_context": "user"})

	listed := func(tok string) []string {
		var out []string
		for _, it := range w.expect(t, http.StatusOK, http.MethodGet, whkPath, tok, nil).items() {
			out = append(out, it["webhook_trigger_id"].(string))
		}
		return out
	}
	require.ElementsMatch(t, []string{"alice-team"}, listed(bob))
	require.ElementsMatch(t, []string{"alice-private", "alice-team"}, listed(alice))
	require.ElementsMatch(t, []string{"alice-private", "alice-team"}, listed(w.adm))
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, whkPath + "/alice-private", nil}, {http.MethodGet, whkPath + "/alice-private/deliveries", nil},
		{http.MethodPatch, whkPath + "/alice-private", obj{"name": "mine"}}, {http.MethodDelete, whkPath + "/alice-private", nil},
		{http.MethodPost, whkPath + "/alice-private:disable", nil}, {http.MethodPost, whkPath + "/alice-private:regenerate-secret", nil},
	} {
		w.expectProblem(t, http.StatusNotFound, "not_found", c.method, c.path, bob, c.body)
	}
	w.expect(t, http.StatusOK, http.MethodGet, whkPath+"/alice-team", bob, nil)
	w.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPatch, whkPath+"/alice-team", bob, obj{"name": "mine"})
	w.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodDelete, whkPath+"/alice-team", bob, nil)
	w.expect(t, http.StatusOK, http.MethodPatch, whkPath+"/alice-team", w.adm, obj{"name": "the admin may"})

	// The private trigger's deliveries run as alice, on her entrypoint.
	r = w.deliver(t, "alice-private", "{}", nil)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	rec := w.expect(t, http.StatusOK, http.MethodGet, base+"/invocations/"+r.Body["invocation_id"].(string), alice, nil).Body
	require.Equal(t, privID, rec["entrypoint_id"])
	w.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, base+"/invocations/"+r.Body["invocation_id"].(string), bob, nil)
}

// TestWebhookReceiverOtherMethods: the receiver answers other methods with 405 and Allow: POST,
// never the bearer-token routes' 401.
func TestWebhookReceiverOtherMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		r := e.send(t, request{method: m, path: base + "/webhooks/acme/anything"})
		require.Equal(t, http.StatusMethodNotAllowed, r.Status, "%s: %s", m, r)
		require.Equal(t, http.MethodPost, r.Header.Get("Allow"))
	}
	// HEAD: the same answer without a body.
	res, err := e.client.Head(e.ts.URL + base + "/webhooks/acme/anything")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	require.Equal(t, http.MethodPost, res.Header.Get("Allow"))
}
