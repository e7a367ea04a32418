package console_test

// The console's pages for the resources beyond invocations and schedules, in a real browser on the
// shared server: the Invoke form of an entrypoint, a trigger's dead letters and their redrive, a
// webhook trigger's deliveries, events and event types, secrets, tokens, the audit log and search
// by id. Each test makes the resources it reads (ids of its own), so that it changes nothing the
// other tests read.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/workerproto"
)

const (
	greetID    = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.greet.hello.v1~"
	sinkID     = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.refunds.sink.v1~"
	refundType = "gts.x.core.events.event.v1~vendor.app.commerce.refund_issued.v1~"
)

// open loads a console path and waits for a selector; window.confirm then answers yes (the
// purge, revoke and redrive-all buttons ask first).
func (b *browser) open(t *testing.T, l *lark, path, ready string) {
	t.Helper()
	b.do(t, "open "+path, chromedp.Navigate(l.url+path), chromedp.WaitVisible(chromedp.CSS(ready)))
	eval[bool](t, b, `(window.confirm = () => true, true)`)
}

// texts answers the text of every element the selector matches.
func texts(t *testing.T, b *browser, sel string) []string {
	t.Helper()
	return eval[[]string](t, b, `[...document.querySelectorAll(`+jsString(sel)+`)].map(e => e.textContent.trim())`)
}

func jsString(s string) string {
	b, _ := json.Marshal(s) //nolint:errchkjson // a string always encodes
	return string(b)
}

// TestConsoleInvoke: the entrypoint page's Invoke form has a field per simple property of the
// params schema (a number, a choice for a boolean, a required text) and a JSON textarea for the
// array property; a bad integer is refused in the form; a sync run shows its result in the page;
// an async run opens the new invocation.
func TestConsoleInvoke(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	register(t, l, map[string]any{
		"entrypoint_id": greetID, "title": "Greet", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object", "required": []string{"name"}, "additionalProperties": false,
			"properties": map[string]any{
				"name":  map[string]any{"type": "string", "description": "who to greet"},
				"times": map[string]any{"type": "integer", "default": 1},
				"loud":  map[string]any{"type": "boolean", "default": false},
				"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			}}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []string{"sync", "async"}, "default": "async"},
			"retry": map[string]any{"max_attempts": 1}},
		"implementation": starlark("def main(ctx, input):\n    return {\"greeting\": (\"HELLO \" if input[\"loud\"] else \"hello \") + input[\"name\"], \"times\": input[\"times\"], \"tags\": input[\"tags\"]}\n"),
	})
	b.login(t, l)
	b.open(t, l, "/console/entrypoints/"+greetID, "#invoke")
	b.do(t, "open the form", chromedp.Click(chromedp.ID("invoke")), chromedp.WaitVisible(chromedp.ID("invoke-form")))
	require.Equal(t, []string{"p.name", "p.loud", "p.times", "params", "mode"},
		eval[[]string](t, b, `[...document.querySelectorAll('#invoke-form [name]')].map(e => e.name)`), "the required field first, then in the schema's order")
	require.Equal(t, "number", eval[string](t, b, `document.querySelector('[name="p.times"]').type`))
	require.Equal(t, "1", eval[string](t, b, `document.querySelector('[name="p.times"]').value`), "the schema's default")
	require.Equal(t, "async", eval[string](t, b, `document.querySelector('#invoke-form [name="mode"]').value`), "the traits' default mode")

	b.do(t, "a bad integer",
		chromedp.SendKeys(chromedp.CSS(`[name="p.name"]`), "Ada"),
		chromedp.SetValue(chromedp.CSS(`[name="p.times"]`), "2.5"),
		chromedp.SetValue(chromedp.CSS(`[name="p.loud"]`), "true"),
		chromedp.SetValue(chromedp.CSS(`#invoke-form textarea`), `{"tags": ["vip"]}`),
		chromedp.SetValue(chromedp.CSS(`#invoke-form [name="mode"]`), "sync"),
		chromedp.Click(chromedp.CSS(`#invoke-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#invoke-form .msg.error`)))
	require.Contains(t, eval[string](t, b, `document.querySelector('#invoke-form .msg.error').textContent`), "times must be an integer")

	b.do(t, "run it sync",
		chromedp.SetValue(chromedp.CSS(`[name="p.times"]`), "3"),
		chromedp.Click(chromedp.CSS(`#invoke-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("invoke-outcome")))
	out := eval[string](t, b, `document.getElementById('invoke-outcome').textContent`)
	require.Contains(t, out, "succeeded")
	require.Contains(t, out, `"greeting": "HELLO Ada"`)
	require.Contains(t, out, `"times": 3`)
	require.Contains(t, out, `"vip"`)
	b.screenshot(t, "invoke-sync")

	b.do(t, "run it async",
		chromedp.SetValue(chromedp.CSS(`#invoke-form [name="mode"]`), "async"),
		chromedp.Click(chromedp.CSS(`#invoke-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#inv-head h1`)))
	id := strings.TrimPrefix(eval[string](t, b, `location.pathname`), "/console/invocations/")
	require.True(t, strings.HasPrefix(id, "inv_"), id)
	rec := call(t, l.url, l.token, "GET", "/invocations/"+id, nil, 200)
	require.Equal(t, "async", rec["mode"])
	require.Equal(t, map[string]any{"name": "Ada", "times": 3.0, "loud": true, "tags": []any{"vip"}}, rec["params"])
}

// TestConsoleDeadLetters: two events reach a trigger whose entrypoint is disabled, so each leaves a
// dead letter; once the entrypoint is enabled again, Redrive on one starts its invocation and
// removes it, and Redrive all takes the other.
func TestConsoleDeadLetters(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	register(t, l, map[string]any{
		"entrypoint_id": sinkID, "title": "Refund sink", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []string{"sync", "async"}, "default": "async"},
			"retry": map[string]any{"max_attempts": 1}},
		"implementation": starlark("def main(ctx, input):\n    return {\"ok\": True}\n"),
	})
	call(t, l.url, l.token, "POST", "/triggers", map[string]any{"trigger_id": "refund-sink", "event_type_id": refundType, "entrypoint_id": sinkID}, 201)
	call(t, l.url, l.token, "POST", "/entrypoints/"+sinkID+":status", map[string]any{"action": "disable"}, 200)
	for _, id := range []string{"rf-1", "rf-2"} {
		call(t, l.url, l.token, "POST", "/events", map[string]any{"event_id": id, "event_type_id": refundType, "payload": map[string]any{"refund_id": id}}, 202)
	}
	call(t, l.url, l.token, "POST", "/entrypoints/"+sinkID+":status", map[string]any{"action": "enable"}, 200)

	b.login(t, l)
	b.open(t, l, "/console/triggers", `a[href="/console/triggers/refund-sink"]`)
	b.do(t, "open the trigger", chromedp.Click(chromedp.CSS(`a[href="/console/triggers/refund-sink"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#dead-letters table`)))
	eval[bool](t, b, `(window.confirm = () => true, true)`)
	require.Len(t, texts(t, b, `#dead-letters tbody tr`), 2)
	require.Contains(t, eval[string](t, b, `document.getElementById('dead-letters').textContent`), "not started")
	b.screenshot(t, "dead-letters")

	first := eval[string](t, b, `document.querySelector('[data-redrive]').dataset.redrive`)
	b.do(t, "redrive one",
		chromedp.Click(chromedp.CSS(`[data-redrive="`+first+`"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`[data-redrive="`+first+`"]`)))
	require.Contains(t, eval[string](t, b, `document.getElementById('flash').textContent`), "Redriven: 1 dead letter as inv_")
	require.Len(t, texts(t, b, `#dead-letters tbody tr`), 1)
	left := call(t, l.url, l.token, "GET", "/triggers/refund-sink/dead-letters", nil, 200)["items"].([]any)
	require.Len(t, left, 1)
	require.NotEqual(t, first, left[0].(map[string]any)["dead_letter_id"])

	b.do(t, "redrive all",
		chromedp.Click(chromedp.ID("redrive-all")),
		chromedp.WaitVisible(chromedp.CSS(`#dead-letters .empty`)))
	require.Empty(t, call(t, l.url, l.token, "GET", "/triggers/refund-sink/dead-letters", nil, 200)["items"])
	page := call(t, l.url, l.token, "GET", "/invocations?$filter="+strings.ReplaceAll("entrypoint_id eq '"+sinkID+"'", " ", "%20"), nil, 200)
	require.Len(t, page["items"], 2, "each redrive started an invocation")
}

// TestConsoleWebhookDeliveries: a delivery posted to a webhook trigger is listed on its page with
// its outcome and a link to the invocation it started; the trigger's secret never shows.
func TestConsoleWebhookDeliveries(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	hook := call(t, l.url, l.token, "POST", "/webhook-triggers", map[string]any{"webhook_trigger_id": "shop-hook", "entrypoint_id": fnID,
		"authentication": map[string]any{"type": "bearer"}}, 201)
	secret := hook["secret"].(string)
	post := func(token string) *http.Response {
		req, err := http.NewRequest("POST", l.url+apiBase+"/webhooks/"+tenantID+"/shop-hook", bytes.NewReader([]byte(`{"order":"o-9"}`)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res
	}
	require.Equal(t, 401, post("wrong").StatusCode)
	require.Equal(t, 202, post(secret).StatusCode)

	b.login(t, l)
	b.open(t, l, "/console/webhooks", `#webhook-list a[href="/console/webhooks/shop-hook"]`)
	b.do(t, "open the webhook trigger", chromedp.Click(chromedp.CSS(`a[href="/console/webhooks/shop-hook"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#deliveries table`)))
	rows := texts(t, b, `#deliveries tbody tr`)
	require.Len(t, rows, 2, "newest first: the accepted delivery, then the refused one")
	require.Contains(t, rows[0], "accepted")
	require.Contains(t, rows[0], "202")
	require.Contains(t, rows[1], "unauthorized")
	require.Contains(t, rows[1], "401")
	require.Contains(t, eval[string](t, b, `document.querySelector('dl.props').textContent`), "/webhooks/acme/shop-hook")
	require.NotContains(t, eval[string](t, b, `document.body.textContent`), secret)
	b.screenshot(t, "webhook-deliveries")
	b.do(t, "filter by outcome",
		chromedp.SetValue(chromedp.CSS(`form.filters select[name="outcome"]`), "accepted"),
		chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#deliveries a[href^="/console/invocations/inv_"]`)))
	require.Equal(t, "?outcome=accepted", eval[string](t, b, `location.search`))
	require.Len(t, texts(t, b, `#deliveries tbody tr`), 1)
	b.do(t, "open the delivery's invocation", chromedp.Click(chromedp.CSS(`#deliveries a[href^="/console/invocations/inv_"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#inv-head h1`)))
}

// TestConsoleEventsAndSecrets: the event types and events pages list what the API holds (the
// payload and schema one click away); the secrets page lists names and never a value.
func TestConsoleEventsAndSecrets(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	typeID := "gts.x.core.events.event.v1~vendor.app.commerce.gift_sent.v1~"
	call(t, l.url, l.token, "POST", "/event-types", map[string]any{"event_type_id": typeID, "description": "A gift was sent",
		"schema": map[string]any{"type": "object", "required": []string{"gift_id"}, "properties": map[string]any{"gift_id": map[string]any{"type": "string"}}}}, 201)
	call(t, l.url, l.token, "POST", "/events", map[string]any{"event_id": "gift-1", "event_type_id": typeID, "payload": map[string]any{"gift_id": "g-77"}}, 202)
	call(t, l.url, l.token, "POST", "/secrets", map[string]any{"name": "shop_key", "value": "sk_live_do_not_show", "allowed_hosts": []string{"api.shop.example"}}, 201)

	b.login(t, l)
	b.open(t, l, "/console/event-types", `a[href="/console/event-types/`+typeID+`"]`)
	b.do(t, "open the event type", chromedp.Click(chromedp.CSS(`a[href="/console/event-types/`+typeID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`pre[aria-label="Payload schema"]`)))
	require.Contains(t, eval[string](t, b, `document.querySelector('pre[aria-label="Payload schema"]').textContent`), "gift_id")
	b.do(t, "its events", chromedp.Click(chromedp.CSS(`#main .actions a`)), chromedp.WaitVisible(chromedp.CSS(`#event-list a[href="/console/events/gift-1"]`)))
	require.Len(t, texts(t, b, `#event-list tbody tr`), 1, "only the events of the type")
	b.do(t, "open the event", chromedp.Click(chromedp.CSS(`#event-list a[href="/console/events/gift-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`pre[aria-label="Payload"]`)))
	require.Contains(t, eval[string](t, b, `document.querySelector('pre[aria-label="Payload"]').textContent`), "g-77")
	b.screenshot(t, "event")

	b.open(t, l, "/console/secrets", `#secret-list table`)
	require.Contains(t, texts(t, b, `#secret-list tbody td:first-child`), "shop_key")
	require.NotContains(t, eval[string](t, b, `document.body.textContent`), "sk_live_do_not_show")
	b.screenshot(t, "secrets")
}

// TestConsoleTokensAndAudit: the tokens page revokes a token (it then gets 401), and the audit log,
// filtered by type in its form, shows that revocation and only token events; a time range in the
// future shows none.
func TestConsoleTokensAndAudit(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	bob := call(t, l.url, l.token, "POST", "/tokens", map[string]any{"subject_id": "bob", "roles": []string{"viewer"}, "description": "Bob's laptop"}, 201)
	bobID := bob["id"].(string)
	b.login(t, l)
	b.open(t, l, "/console/tokens", `[data-revoke="`+bobID+`"]`)
	require.NotContains(t, eval[string](t, b, `document.body.textContent`), "lark_", "no token secret is shown")
	b.do(t, "revoke bob's token", chromedp.Click(chromedp.CSS(`[data-revoke="`+bobID+`"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`[data-revoke="`+bobID+`"]`)))
	call(t, l.url, bob["token"].(string), "GET", "/whoami", nil, 401)

	b.open(t, l, "/console/audit", `#audit-list table`)
	b.do(t, "filter by type",
		chromedp.SendKeys(chromedp.CSS(`form.filters input[name="type"]`), "token_revoked"),
		chromedp.SetValue(chromedp.CSS(`form.filters select[name="resource_type"]`), "token"),
		chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit-list a[href="/console/audit?resource_id=`+bobID+`"]`)))
	require.Equal(t, "?type=token_revoked&resource_type=token", eval[string](t, b, `location.search`))
	types := texts(t, b, `#audit-list tbody td:nth-child(2)`)
	require.NotEmpty(t, types)
	for _, ty := range types {
		require.Equal(t, "token_revoked", ty)
	}
	b.screenshot(t, "audit-filtered")

	b.do(t, "follow the resource link", chromedp.Click(chromedp.CSS(`#audit-list a[href="/console/audit?resource_id=`+bobID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit-list table`)))
	require.ElementsMatch(t, []string{"token_created", "token_revoked"}, texts(t, b, `#audit-list tbody td:nth-child(2)`))

	b.do(t, "a time range in the future",
		chromedp.SetValue(chromedp.CSS(`form.filters input[name="from"]`), "2099-01-01T00:00"),
		chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#main .empty`)))
	require.Contains(t, eval[string](t, b, `location.search`), "from=2099-01-01T00%3A00")
}

// TestConsoleSearch: an id typed in the header's search box opens its page: an invocation, an
// entrypoint by its GTS id, a schedule and a trigger by the ids their owners chose; an unknown id
// says so.
func TestConsoleSearch(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	search := func(id, ready string) {
		t.Helper()
		b.do(t, "search "+id,
			chromedp.SendKeys(chromedp.ID("search"), id+kb.Enter),
			chromedp.WaitVisible(chromedp.CSS(ready)))
	}
	search(l.invocation, `#inv-head h1`)
	require.Equal(t, "/console/invocations/"+l.invocation, eval[string](t, b, `location.pathname`))
	search(wfID, `#main pre.code`)
	require.Equal(t, "/console/entrypoints/"+wfID, eval[string](t, b, `decodeURIComponent(location.pathname)`))
	search("nightly", `#history`)
	require.Equal(t, "/console/schedules/nightly", eval[string](t, b, `location.pathname`))
	search("on-order", `#dead-letters`)
	require.Equal(t, "/console/triggers/on-order", eval[string](t, b, `location.pathname`))
	search("no-such-id", `#search-none`)
	require.Contains(t, eval[string](t, b, `document.getElementById('search-none').textContent`), "Nothing has the id no-such-id")
	b.screenshot(t, "search-none")
}

// TestConsoleResourceModules runs the new modules on made-up data: the Gantt rows of a workflow
// compensated by its handler (one row, not a "compensate null" one), the retry text, the Invoke
// form's plan and params, the audit filter, search's id forms, and the compensated badge.
func TestConsoleResourceModules(t *testing.T) {
	b := newBrowser(t)
	load := moduleLoader(t, b)
	handler := `[{"seq":1,"at":"2026-11-25T10:00:00Z","event_type":"created","status":"queued","step_name":null,"details":{}},
		{"seq":2,"at":"2026-11-25T10:00:01Z","event_type":"failed","status":"failed","step_name":null,"details":{}},
		{"seq":3,"at":"2026-11-25T10:00:02Z","event_type":"compensation_started","status":"compensating","step_name":null,"details":{"handler_invocation_id":"inv_h"}},
		{"seq":4,"at":"2026-11-25T10:00:05Z","event_type":"compensation_completed","status":"compensated","step_name":null,"details":{}}]`
	require.JSONEq(t, `[["invocation","invocation",["run-fail"]],["comp:workflow","compensation handler",["comp"]]]`,
		load("gantt.js", `m.model(`+handler+`).rows.map(r => [r.key, r.label, r.bars.map(b => b.cls)])`))

	retry := load("gantt.js", `m.retryText({at: '2026-11-25T10:00:00Z', event_type: 'step_retried',
		details: {delay_ms: 5000, next_attempt: 2, error: {message: 'boom'}, available_at: '2026-11-25T10:00:05Z'}})`)
	require.Regexp(t, `^"retrying at .+ after 5.00 s \(attempt 1 failed: boom\)"$`, retry)

	require.JSONEq(t, `{"fields":[{"name":"n","type":"integer","required":true,"enum":null,"description":""},
		{"name":"color","type":"string","required":false,"enum":["red","blue"],"default":"red","description":"Color"}],"json":false}`,
		load("invoke.js", `m.plan({type: 'object', required: ['n'], additionalProperties: false,
			properties: {n: {type: 'integer'}, color: {enum: ['red', 'blue'], default: 'red', title: 'Color'}}})`))
	require.JSONEq(t, `{"fields":[],"json":true}`, load("invoke.js", `m.plan({type: 'object'})`))
	require.JSONEq(t, `{"a":[1],"n":2,"ok":false,"s":" x "}`, load("invoke.js", `m.collect([{name: 'n', type: 'integer'},
		{name: 'ok', type: 'boolean'}, {name: 's', type: 'string'}, {name: 'unset', type: 'number'}], {n: '2', ok: 'false', s: ' x ', unset: ''}, '{"a": [1], "n": 1}')`))
	require.Equal(t, `"name is required"`, load("invoke.js", `(() => { try { m.collect([{name: 'name', type: 'string', required: true}], {}, ''); } catch (e) { return e.message; } })()`))

	require.Equal(t, `"actor_id eq 'alice' and type eq 'gts.x.core.serverless.audit.v1~x.core.serverless.audit.token_created.v1~' and resource_id eq 'it''s'"`,
		load("audit.js", `m.auditFilter(new URLSearchParams('actor=alice&type=token_created&resource_id=it%27s'))`))
	require.JSONEq(t, `["invocation","entrypoint","entrypoint","event type","event",null]`,
		load("search.js", `['inv_1', 'ep_2', '`+wfID+`', '`+orderType+`', 'evt_3', 'nightly'].map(id => m.direct(id)?.kind ?? null)`))

	colors := load("dom.js", `['compensated', 'succeeded'].map(s => { const e = m.badge(s); document.body.append(e); return getComputedStyle(e).backgroundColor; })`)
	var bg []string
	require.NoError(t, json.Unmarshal([]byte(colors), &bg))
	require.NotEqual(t, bg[0], bg[1], "compensated has a badge of its own")
}

// TestConsoleWorkers: a worker that polled shows on the Workers page (reached from the nav) once
// its node recorded it: online, its node, key, capacity and version; the status filter in the form
// narrows the list, and an offline filter says none match.
func TestConsoleWorkers(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	env, err := l.workerKeys.Sign(workerproto.PollRequest{WorkerID: "console-w1", MaxTasks: 1, Concurrency: 6, Version: "2.0.1"}, time.Now(), time.Minute)
	require.NoError(t, err)
	body, err := json.Marshal(env)
	require.NoError(t, err)
	hr, err := http.Post(l.url+"/api/serverless-runtime/v1"+workerproto.PathPoll, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, hr.Body.Close())
	require.Equal(t, http.StatusOK, hr.StatusCode)
	require.NoError(t, l.srv.WorkerHub.Record(context.Background()))

	b.login(t, l)
	b.do(t, "the workers page", chromedp.Click(chromedp.CSS(`#nav a[href="/console/workers"]`)), chromedp.WaitVisible(chromedp.CSS(`#worker-list table`)))
	row := eval[[]string](t, b, `[...document.querySelectorAll('#worker-list tbody tr')].map(r => r.textContent)
		.filter(s => s.includes('console-w1'))`)
	require.Len(t, row, 1)
	cells := eval[[]string](t, b, `[...[...document.querySelectorAll('#worker-list tbody tr')].find(r => r.textContent.includes('console-w1')).cells].map(c => c.textContent.trim())`)
	require.Equal(t, []string{"console-w1", "node-a", "online", "0", "6", "wk1", "all"}, cells[:7])
	require.Equal(t, "2.0.1", cells[9])
	b.screenshot(t, "workers")

	b.do(t, "only the offline ones",
		chromedp.SetValue(chromedp.CSS(`form.filters select[name="status"]`), "offline"),
		chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#main .empty`)))
	require.Equal(t, "?status=offline", eval[string](t, b, `location.search`))
	require.Contains(t, eval[string](t, b, `document.getElementById('main').textContent`), "No workers match.")
}
