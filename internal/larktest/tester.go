package larktest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlarkstruct"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/invocation"
)

// tester is the `t` argument of every test function: the test's runtime, its stubs and clock.
type tester struct {
	ctx     context.Context
	rt      *runtime
	methods map[string]*starlark.Builtin
}

var _ starlark.HasAttrs = (*tester)(nil)

func newTester(ctx context.Context, rt *runtime) *tester {
	t := &tester{ctx: ctx, rt: rt}
	m := map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
		"invoke": t.invoke, "get": t.get, "invocations": t.invocations, "cancel": t.cancel,
		"stub_http": t.stubHTTP, "http_calls": t.httpCalls, "secret": t.secret,
		"advance": t.advance, "now": t.now,
		"send_event": t.sendEvent, "webhook": t.webhook, "trigger_schedule": t.triggerSchedule,
	}
	t.methods = map[string]*starlark.Builtin{}
	for name, fn := range m {
		t.methods[name] = starlark.NewBuiltin("t."+name, fn)
	}
	return t
}

func (t *tester) String() string        { return "<t>" }
func (t *tester) Type() string          { return "tester" }
func (t *tester) Freeze()               {}
func (t *tester) Truth() starlark.Bool  { return true }
func (t *tester) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: tester") }

// Attr returns a method of t.
func (t *tester) Attr(name string) (starlark.Value, error) {
	if b, ok := t.methods[name]; ok {
		return b, nil
	}
	return nil, nil
}

// AttrNames lists t's methods.
func (t *tester) AttrNames() []string {
	out := make([]string, 0, len(t.methods))
	for k := range t.methods {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fail turns an error of the harness into a failure at the calling line.
func fail(thread *starlark.Thread, b *starlark.Builtin, err error) error {
	return failAt(thread, "%s: %v", b.Name(), err)
}

// runAll runs every invocation until each has ended or waits for an event.
func (t *tester) runAll() error {
	return t.rt.runUntilBlocked(t.ctx)
}

// invoke: t.invoke(name, params=None, mode="async") starts an entrypoint through the API and runs
// it (crossing its timers) until it ends or waits for an event; it returns the run.
func (t *tester) invoke(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var params starlark.Value = starlark.None
	mode := "async"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "params?", &params, "mode?", &mode); err != nil {
		return nil, err
	}
	gid, err := t.rt.resolve(name)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	if mode == "sync" && strings.Contains(gid, workflowType) {
		// A sync workflow call waits for the end in real time, while nothing moves the clock.
		return nil, failAt(thread, "t.invoke: mode=\"sync\" is for functions; a workflow runs async (the harness runs it to its end)")
	}
	p, err := fromStarlark(params, 0)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	if p == nil {
		p = map[string]any{}
	}
	out, err := t.rt.api(t.ctx, "/invocations", map[string]any{"entrypoint_id": gid, "params": p, "mode": mode})
	if err != nil {
		return nil, fail(thread, b, err)
	}
	rec, _ := out["record"].(map[string]any)
	id, _ := rec["invocation_id"].(string)
	if err := t.runAll(); err != nil {
		return nil, fail(thread, b, err)
	}
	return t.run(thread, b, id)
}

// run is the current view of invocation id: struct(id, status, params, result, error, attempt,
// entrypoint_id, parent_id, timeline, steps, compensations).
func (t *tester) run(thread *starlark.Thread, b *starlark.Builtin, id string) (starlark.Value, error) {
	rec, evs, err := t.rt.srv.Invoke.Events(t.ctx, t.rt.sc, id)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	return runValue(rec, evs)
}

func runValue(rec invocation.Record, evs []invocation.Event) (starlark.Value, error) {
	raw, err := json.Marshal(api.Timeline(evs))
	if err != nil {
		return nil, err
	}
	var tl []map[string]any
	if err := decodeJSON(raw, &tl); err != nil {
		return nil, err
	}
	var timeline, steps, comps []starlark.Value
	for _, e := range tl {
		entry := map[string]any{"type": e["event_type"], "details": e["details"], "at": e["at"]}
		if s, ok := e["step_name"].(string); ok {
			entry["step_name"] = s
		}
		v, err := toStarlark(entry, 0)
		if err != nil {
			return nil, err
		}
		timeline = append(timeline, v)
		step, _ := e["step_name"].(string)
		switch e["event_type"] {
		case "step_completed":
			steps = append(steps, starlark.String(step))
		case "compensation_completed", "compensation_failed":
			if step != "" {
				comps = append(comps, starlark.String(step))
			}
		}
	}
	var result any
	if len(rec.Result) > 0 {
		if err := decodeJSON(rec.Result, &result); err != nil {
			return nil, err
		}
	}
	var errv any
	if rec.Error != nil {
		b, err := json.Marshal(rec.Error)
		if err != nil {
			return nil, err
		}
		if err := decodeJSON(b, &errv); err != nil {
			return nil, err
		}
	}
	var params any
	if len(rec.Params) > 0 {
		if err := decodeJSON(rec.Params, &params); err != nil {
			return nil, err
		}
	}
	pv, err := toStarlark(params, 0)
	if err != nil {
		return nil, err
	}
	res, err := toStarlark(result, 0)
	if err != nil {
		return nil, err
	}
	ev, err := toStarlark(errv, 0)
	if err != nil {
		return nil, err
	}
	return starlarkstruct.FromStringDict(starlark.String("run"), starlark.StringDict{
		"id": starlark.String(rec.ID), "status": starlark.String(string(rec.Status)), "params": pv, "result": res, "error": ev,
		"attempt": starlark.MakeInt(rec.Attempt), "entrypoint_id": starlark.String(rec.EntrypointID),
		"parent_id": starlark.String(rec.ParentID),
		"timeline":  starlark.NewList(timeline), "steps": starlark.NewList(steps), "compensations": starlark.NewList(comps),
	}), nil
}

func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	return dec.Decode(v)
}

// runID takes a run struct or an invocation id.
func runID(v starlark.Value) (string, error) {
	switch x := v.(type) {
	case starlark.String:
		return string(x), nil
	case *starlarkstruct.Struct:
		id, err := x.Attr("id")
		if err == nil {
			if s, ok := id.(starlark.String); ok {
				return string(s), nil
			}
		}
	}
	return "", fmt.Errorf("want a run or an invocation id, got %s", v.Type())
}

// get: t.get(run_or_id) is the run as it is now (it runs nothing).
func (t *tester) get(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "run", &v); err != nil {
		return nil, err
	}
	id, err := runID(v)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	return t.run(thread, b, id)
}

// invocations: t.invocations(name=None) lists the runs of the test (of one entrypoint), oldest
// first, whoever started them (the test, a schedule, a trigger, a webhook, a parent).
func (t *tester) invocations(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := ""
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name?", &name); err != nil {
		return nil, err
	}
	gid := ""
	if name != "" {
		var err error
		if gid, err = t.rt.resolve(name); err != nil {
			return nil, fail(thread, b, err)
		}
	}
	recs, err := t.rt.records(t.ctx)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].CreatedAt.Equal(recs[j].CreatedAt) {
			return recs[i].CreatedAt.Before(recs[j].CreatedAt)
		}
		return recs[i].ID < recs[j].ID // ids are time-ordered (UUIDv7)
	})
	var ids []string
	for _, rec := range recs {
		if gid == "" || rec.EntrypointID == gid {
			ids = append(ids, rec.ID)
		}
	}
	var runs []starlark.Value
	for _, id := range ids {
		r, err := t.run(thread, b, id)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return starlark.NewList(runs), nil
}

// cancel: t.cancel(run) cancels an invocation (its compensations run) and runs what follows.
func (t *tester) cancel(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "run", &v); err != nil {
		return nil, err
	}
	id, err := runID(v)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	if _, err := t.rt.api(t.ctx, "/invocations/"+url.PathEscape(id)+":control", map[string]any{"action": "cancel"}); err != nil {
		return nil, fail(thread, b, err)
	}
	if err := t.runAll(); err != nil {
		return nil, fail(thread, b, err)
	}
	return t.run(thread, b, id)
}

// stubHTTP: t.stub_http(method, url, status=200, json=None, text=None, headers=None, error=None,
// times=0) declares an upstream answer. url may end with * to match a prefix. error is "timeout"
// or "transport". times > 0 answers that many requests only (then the next matching stub does).
func (t *tester) stubHTTP(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var method, u, text, errKind string
	status, times := 200, 0
	var body, headers starlark.Value = starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "method", &method, "url", &u, "status?", &status, "json?", &body,
		"text?", &text, "headers?", &headers, "error?", &errKind, "times?", &times); err != nil {
		return nil, err
	}
	s := &stub{Method: strings.ToUpper(method), URL: u, Status: status, Headers: map[string]string{}, Fail: errKind, Times: times}
	if s.Method != http.MethodGet && s.Method != http.MethodPost {
		return nil, failAt(thread, "t.stub_http: method must be GET or POST (what user code can send), got %q", method)
	}
	if status < 100 || status > 599 {
		return nil, failAt(thread, "t.stub_http: status must be 100..599, got %d", status)
	}
	switch errKind {
	case "", "timeout", "transport":
	default:
		return nil, failAt(thread, "t.stub_http: error must be \"timeout\" or \"transport\", got %q", errKind)
	}
	if times < 0 {
		return nil, failAt(thread, "t.stub_http: times must not be negative")
	}
	if body != starlark.None {
		v, err := fromStarlark(body, 0)
		if err != nil {
			return nil, fail(thread, b, err)
		}
		if s.Body, err = json.Marshal(v); err != nil {
			return nil, fail(thread, b, err)
		}
		s.Headers["Content-Type"] = "application/json"
	} else if text != "" {
		s.Body = []byte(text)
		s.Headers["Content-Type"] = "text/plain; charset=utf-8"
	}
	if len(s.Body) > maxStubBodySize {
		return nil, failAt(thread, "t.stub_http: body larger than %d bytes", maxStubBodySize)
	}
	if headers != starlark.None {
		h, err := fromStarlark(headers, 0)
		if err != nil {
			return nil, fail(thread, b, err)
		}
		hm, ok := h.(map[string]any)
		if !ok {
			return nil, failAt(thread, "t.stub_http: headers must be a dict")
		}
		for k, v := range hm {
			sv, ok := v.(string)
			if !ok {
				return nil, failAt(thread, "t.stub_http: header %q must be a string", k)
			}
			s.Headers[k] = sv
		}
	}
	if err := t.rt.http.add(s); err != nil {
		return nil, fail(thread, b, err)
	}
	return starlark.None, nil
}

// secret: t.secret(name, value, allowed_hosts) creates a tenant secret (POST /secrets) that code
// names in a header as {{secret:NAME}}; the stubbed request carries the value, the code never does.
func (t *tester) secret(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name, value string
	var hosts *starlark.List
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "value", &value, "allowed_hosts", &hosts); err != nil {
		return nil, err
	}
	h, err := fromStarlark(hosts, 0)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	if _, err := t.rt.api(t.ctx, "/secrets", map[string]any{"name": name, "value": value, "allowed_hosts": h}); err != nil {
		return nil, fail(thread, b, err)
	}
	return starlark.None, nil
}

// httpCalls: t.http_calls() lists the requests user code made, in order: struct(method, url,
// headers, body), body decoded from JSON when it is JSON.
func (t *tester) httpCalls(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	var out []starlark.Value
	for _, c := range t.rt.http.recorded() {
		hdr := map[string]any{}
		for k, v := range c.Headers {
			hdr[k] = v
		}
		h, err := toStarlark(hdr, 0)
		if err != nil {
			return nil, fail(thread, b, err)
		}
		body, err := toStarlark(decodeBody(c.Body), 0)
		if err != nil {
			return nil, fail(thread, b, err)
		}
		out = append(out, starlarkstruct.FromStringDict(starlark.String("http_call"), starlark.StringDict{
			"method": starlark.String(c.Method), "url": starlark.String(c.URL), "headers": h, "body": body}))
	}
	return starlark.NewList(out), nil
}

// parseDuration reads "90s", "15m", "1h30m", "3d" or an int of milliseconds.
func parseDuration(v starlark.Value) (time.Duration, error) {
	switch x := v.(type) {
	case starlark.Int:
		ms, ok := x.Int64()
		if !ok || ms < 0 {
			return 0, fmt.Errorf("milliseconds must be a non-negative int64")
		}
		return time.Duration(ms) * time.Millisecond, nil
	case starlark.String:
		s := string(x)
		var days time.Duration
		if i := strings.Index(s, "d"); i > 0 {
			n, err := strconv.Atoi(s[:i])
			if err != nil || n < 0 {
				return 0, fmt.Errorf("bad duration %q", s)
			}
			days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		}
		var rest time.Duration
		if s != "" {
			var err error
			if rest, err = time.ParseDuration(s); err != nil {
				return 0, fmt.Errorf("bad duration %q (use 90s, 15m, 1h30m, 3d)", string(x))
			}
		}
		if d := days + rest; d >= 0 {
			return d, nil
		}
	}
	return 0, fmt.Errorf("want a duration string (\"1h\", \"3d\") or milliseconds, got %s", v.String())
}

// advance: t.advance(duration) moves the fake clock forward, running every timer, retry, schedule
// and wait timeout that comes due on the way, at its time.
func (t *tester) advance(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "duration", &v); err != nil {
		return nil, err
	}
	d, err := parseDuration(v)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	if d > maxAutoAdvance {
		return nil, failAt(thread, "t.advance: at most %d days at once", int(maxAutoAdvance.Hours()/24))
	}
	if err := t.rt.advance(t.ctx, d); err != nil {
		return nil, fail(thread, b, err)
	}
	return starlark.None, nil
}

// now: t.now() is the fake clock's time, RFC 3339 in r_now_v1's format.
func (t *tester) now(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.String(t.rt.clock.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")), nil
}

// sendEvent: t.send_event(event_type_id, payload=None, subject=None, source=None, event_id=None)
// publishes an event of the test tenant (POST /events): it wakes the workflows waiting for it and
// starts the triggers matching it; then everything runs. It returns the publish answer as a dict.
func (t *tester) sendEvent(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var typ, subject, source, eventID string
	var payload starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "event_type_id", &typ, "payload?", &payload, "subject?", &subject,
		"source?", &source, "event_id?", &eventID); err != nil {
		return nil, err
	}
	p, err := fromStarlark(payload, 0)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	body := map[string]any{"event_type_id": typ, "payload": p}
	for k, v := range map[string]string{"subject": subject, "source": source, "event_id": eventID} {
		if v != "" {
			body[k] = v
		}
	}
	out, err := t.rt.api(t.ctx, "/events", body)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	if err := t.runAll(); err != nil {
		return nil, fail(thread, b, err)
	}
	return toStarlarkOrFail(thread, b, out)
}

func toStarlarkOrFail(thread *starlark.Thread, b *starlark.Builtin, v any) (starlark.Value, error) {
	sv, err := toStarlark(v, 0)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	return sv, nil
}

// webhook: t.webhook(webhook_trigger_id, body=None, headers=None, query=None, sign=True) delivers
// a request to the trigger's public URL as its sender would: signed, or with the credentials its
// authentication asks for, made from the trigger's secret (sign=False sends only what the test
// gives, to test refusals). The invocation it starts runs; the answer is struct(status, body,
// run), run None when nothing started.
func (t *tester) webhook(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	var body, headers, query starlark.Value = starlark.None, starlark.None, starlark.None
	sign := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "webhook_trigger_id", &id, "body?", &body, "headers?", &headers,
		"query?", &query, "sign?", &sign); err != nil {
		return nil, err
	}
	var raw []byte
	if s, ok := body.(starlark.String); ok {
		raw = []byte(string(s))
	} else if body != starlark.None {
		v, err := fromStarlark(body, 0)
		if err != nil {
			return nil, fail(thread, b, err)
		}
		if raw, err = json.Marshal(v); err != nil {
			return nil, fail(thread, b, err)
		}
	}
	hdr := map[string]string{}
	if _, isText := body.(starlark.String); isText {
		hdr["Content-Type"] = "text/plain; charset=utf-8"
	} else if raw != nil {
		hdr["Content-Type"] = "application/json"
	}
	q := url.Values{}
	for _, pair := range []struct {
		what string
		v    starlark.Value
		set  func(k, v string)
	}{{"headers", headers, func(k, v string) { hdr[k] = v }}, {"query", query, func(k, v string) { q.Set(k, v) }}} {
		if pair.v == starlark.None {
			continue
		}
		m, err := fromStarlark(pair.v, 0)
		if err != nil {
			return nil, fail(thread, b, err)
		}
		mm, ok := m.(map[string]any)
		if !ok {
			return nil, failAt(thread, "t.webhook: %s must be a dict", pair.what)
		}
		for k, v := range mm {
			pair.set(k, fmt.Sprint(v))
		}
	}
	if w, ok := t.rt.webhooks[id]; ok && sign {
		w.sign(raw, t.rt.clock.Now(), hdr, q)
	}
	path := apiBase + "/webhooks/" + Tenant + "/" + url.PathEscape(id)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	status, out, err := t.rt.call(t.ctx, http.MethodPost, path, raw, hdr, true)
	if err != nil && status < 400 {
		return nil, fail(thread, b, err)
	}
	sv, err := toStarlark(out, 0)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	fields := starlark.StringDict{"status": starlark.MakeInt(status), "body": sv, "run": starlark.None}
	if inv, ok := out["invocation_id"].(string); ok && status < 300 {
		if err := t.runAll(); err != nil {
			return nil, fail(thread, b, err)
		}
		r, err := t.run(thread, b, inv)
		if err != nil {
			return nil, err
		}
		fields["run"] = r
	}
	return starlarkstruct.FromStringDict(starlark.String("webhook_response"), fields), nil
}

// triggerSchedule: t.trigger_schedule(schedule_id, params_override=None) runs a schedule now
// (POST /schedules/{id}:trigger) and returns the run it started.
func (t *tester) triggerSchedule(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	var override starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "schedule_id", &id, "params_override?", &override); err != nil {
		return nil, err
	}
	body := map[string]any{}
	if override != starlark.None {
		v, err := fromStarlark(override, 0)
		if err != nil {
			return nil, fail(thread, b, err)
		}
		body["params_override"] = v
	}
	out, err := t.rt.api(t.ctx, "/schedules/"+url.PathEscape(id)+":trigger", body)
	if err != nil {
		return nil, fail(thread, b, err)
	}
	rec, _ := out["invocation"].(map[string]any)
	inv, _ := rec["invocation_id"].(string)
	if inv == "" {
		return toStarlarkOrFail(thread, b, out)
	}
	if err := t.runAll(); err != nil {
		return nil, fail(thread, b, err)
	}
	return t.run(thread, b, inv)
}
