package larktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/manifest"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tokens"
)

// Tenant is the tenant every test runs in.
const Tenant = "test"

// Epoch is the fake clock's time when a test starts.
var Epoch = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

const apiBase = "/api/serverless-runtime/v1"

// Bounds of the harness's loops: how many claim rounds one settle runs, how many timers one
// auto-advance crosses, and how far it may jump.
const (
	maxRounds       = 10_000
	maxAutoAdvances = 1000
	maxAutoAdvance  = 400 * 24 * time.Hour
)

// runtime is one test's Lark: the real server's services over a SQLite store in a temporary
// directory, with a fake clock and stubbed egress, driven in process (its HTTP handler is called
// directly; nothing listens) and stepped by the harness instead of background loops.
type runtime struct {
	srv   *server.Server
	clock *clock.Fake
	http  *transport
	dir   string
	token string
	sc    auth.SecurityContext
	// names maps short names (calculate_tax) and manifest base names to entrypoint ids.
	names map[string]string
	// webhooks keeps each webhook trigger's authentication and secret (shown once, at create), so
	// that t.webhook can sign its deliveries.
	webhooks map[string]webhookAuth
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newRuntime starts a runtime and deploys set into it.
func newRuntime(ctx context.Context, set manifest.Set) (*runtime, error) {
	dir, err := os.MkdirTemp("", "lark-test-*")
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i + 1) // a fixed test key: nothing sealed here outlives the test
	}
	kr, err := keyring.New(key)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	rt := &runtime{clock: clock.NewFake(Epoch), http: &transport{}, dir: dir, names: map[string]string{},
		webhooks: map[string]webhookAuth{}}
	srv, err := server.New(ctx, server.Config{DataDir: dir, Clock: rt.clock, Logger: quietLogger(), CPUSlots: -1,
		EgressTransport: rt.http, Sleep: rt.sleep, Keyring: kr, SQLiteSynchronous: "NORMAL", NodeID: "lark-test"})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	rt.srv = srv
	if err := rt.provision(ctx); err != nil {
		return nil, errors.Join(err, rt.close())
	}
	if err := rt.deploy(ctx, set); err != nil {
		return nil, errors.Join(err, rt.close())
	}
	return rt, nil
}

// close stops the runtime and removes its directory.
func (rt *runtime) close() error {
	return errors.Join(rt.srv.Close(), os.RemoveAll(rt.dir))
}

// sleep is the wait between two attempts of an r_http_* retry: the fake clock moves on by d, at
// once.
func (rt *runtime) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rt.clock.Advance(d)
	return nil
}

// provision enables the test tenant (any outbound host: egress is stubbed) and issues its admin
// token.
func (rt *runtime) provision(ctx context.Context) error {
	op := auth.SecurityContext{SubjectID: tokens.OperatorSubject, Operator: true}
	if _, err := rt.srv.Tenants.Enable(ctx, op, Tenant, []byte(`{"governance":{"allowed_outbound_domains":["*"]}}`)); err != nil {
		return fmt.Errorf("enable the test tenant: %w", err)
	}
	tk, err := rt.srv.Tokens.CreateToken(ctx, op, tokens.CreateTokenRequest{TenantID: Tenant, SubjectID: "tester",
		Roles: []auth.Role{auth.RoleAdmin}, Description: "lark test"})
	if err != nil {
		return fmt.Errorf("test token: %w", err)
	}
	rt.token = tk.Secret
	rt.sc, err = rt.srv.Tokens.Authenticate(ctx, rt.token)
	return err
}

// apiError is an API answer that is not 2xx: its problem document's title and detail.
type apiError struct {
	Status int
	Body   map[string]any
}

func (e *apiError) Error() string {
	var parts []string
	for _, k := range []string{"title", "detail"} {
		if s, ok := e.Body[k].(string); ok && s != "" {
			parts = append(parts, s)
		}
	}
	if errs, ok := e.Body["errors"].([]any); ok {
		for _, x := range errs {
			if b, err := json.Marshal(x); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, strings.Join(parts, "; "))
}

// call sends one request to the API handler, in process, with the test token (none when
// anonymous), and decodes the JSON answer.
func (rt *runtime) call(ctx context.Context, method, path string, body any, hdr map[string]string, anonymous bool) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		if raw, ok := body.([]byte); ok {
			rd = bytes.NewReader(raw)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				return 0, nil, err
			}
			rd = bytes.NewReader(b)
		}
	}
	req := httptest.NewRequestWithContext(ctx, method, path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !anonymous {
		req.Header.Set("Authorization", "Bearer "+rt.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	rt.srv.Handler().ServeHTTP(rec, req)
	out := map[string]any{}
	if b := rec.Body.Bytes(); len(bytes.TrimSpace(b)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return rec.Code, nil, fmt.Errorf("%s %s: answer is not JSON: %w", method, path, err)
		}
		if m, ok := v.(map[string]any); ok {
			out = m
		} else {
			out = map[string]any{"value": v}
		}
	}
	if rec.Code >= 300 {
		return rec.Code, out, &apiError{Status: rec.Code, Body: out}
	}
	return rec.Code, out, nil
}

// api POSTs body to the API's path and returns the answer's document.
func (rt *runtime) api(ctx context.Context, path string, body any) (map[string]any, error) {
	_, out, err := rt.call(ctx, http.MethodPost, apiBase+path, body, nil, false)
	return out, err
}

// deploy registers and activates the entrypoints (functions first, so that the compensation
// handlers workflows name exist), then creates the schedules, triggers and webhook triggers.
func (rt *runtime) deploy(ctx context.Context, set manifest.Set) error {
	eps := append([]manifest.Resource(nil), set.Entrypoints...)
	sort.SliceStable(eps, func(i, j int) bool { return !isWorkflow(eps[i]) && isWorkflow(eps[j]) })
	for _, r := range eps {
		out, err := rt.api(ctx, "/entrypoints", r.Body)
		if err != nil {
			return refused(r, "register", err)
		}
		id, _ := out["id"].(string)
		if _, err := rt.api(ctx, "/entrypoints/"+url.PathEscape(id)+":status", map[string]any{"action": "activate"}); err != nil {
			return fmt.Errorf("%s: activate: %w", r.File, err)
		}
		gid := r.ID()
		rt.names[gid] = gid
		rt.name(shortName(gid), gid)
		rt.name(strings.TrimSuffix(filepath.Base(r.File), filepath.Ext(r.File)), gid)
	}
	for _, group := range []struct {
		list []manifest.Resource
		path string
	}{{set.Schedules, "/schedules"}, {set.Triggers, "/triggers"}, {set.Webhooks, "/webhook-triggers"}} {
		for _, r := range group.list {
			out, err := rt.api(ctx, group.path, r.Body)
			if err != nil {
				return refused(r, "create", err)
			}
			if group.path == "/webhook-triggers" {
				if err := rt.keepWebhook(r, out); err != nil {
					return fmt.Errorf("%s: %w", r.File, err)
				}
			}
		}
	}
	return nil
}

// refused explains why the API refused manifest r: the problem's title and detail, then each
// issue where it is: at its line in the .star file for the Starlark source, else at the member
// of the manifest its JSON path names.
func refused(r manifest.Resource, what string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return fmt.Errorf("%s: %s: %w", r.File, what, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: HTTP %d", r.File, what, ae.Status)
	for _, k := range []string{"title", "detail"} {
		if s, ok := ae.Body[k].(string); ok && s != "" {
			b.WriteString(": " + s)
		}
	}
	issues, _ := ae.Body["errors"].([]any)
	for _, x := range issues {
		is, _ := x.(map[string]any)
		path, _ := is["path"].(string)
		msg, _ := is["message"].(string)
		code, _ := is["code"].(string)
		line := jsonInt(is["line"])
		col := jsonInt(is["column"])
		where := r.File
		switch {
		case path == "$.implementation.code.source" && r.SourceFile != "" && line > 0:
			where = fmt.Sprintf("%s:%d:%d", r.SourceFile, line, col)
		case path == "$.implementation.code.source" && line > 0:
			where = fmt.Sprintf("%s (source line %d, column %d)", r.File, line, col)
		default:
			if l, c, ok := r.Position(path); ok {
				where = fmt.Sprintf("%s:%d:%d: %s", r.File, l, c, path)
			}
		}
		fmt.Fprintf(&b, "\n    %s: %s", where, msg)
		if code != "" {
			fmt.Fprintf(&b, " (%s)", code)
		}
	}
	return errors.New(b.String())
}

// jsonInt is v as an int (0 when v is not a JSON number).
func jsonInt(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	i, _ := n.Int64()
	return int(i)
}

// keepWebhook records a created webhook trigger's authentication and secret: the one the
// manifest gave, else the one the server generated.
func (rt *runtime) keepWebhook(r manifest.Resource, out map[string]any) error {
	var w webhookAuth
	b, err := json.Marshal(out["authentication"])
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &w.Auth); err != nil {
		return fmt.Errorf("the created webhook trigger's authentication: %w", err)
	}
	w.Secret, _ = out["secret"].(string)
	if s, ok := r.Body["secret"].(string); ok && s != "" {
		w.Secret = s
	}
	id, _ := out["webhook_trigger_id"].(string)
	rt.webhooks[id] = w
	return nil
}

// workflowType is the part of a workflow entrypoint's GTS id that says it is one.
const workflowType = "~x.core.serverless.workflow.v1~"

func isWorkflow(r manifest.Resource) bool {
	return strings.Contains(r.ID(), workflowType)
}

// shortName is the name segment of an entrypoint's GTS id: calculate_tax for
// "...~vendor.app.billing.calculate_tax.v1~".
func shortName(gid string) string {
	parts := strings.Split(strings.TrimSuffix(gid, "~"), "~")
	segs := strings.Split(parts[len(parts)-1], ".")
	for i := len(segs) - 1; i > 0; i-- {
		if len(segs[i]) > 1 && segs[i][0] == 'v' && isDigits(segs[i][1:]) {
			continue
		}
		return segs[i]
	}
	return ""
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// ambiguous marks a short name that several entrypoints share.
const ambiguous = ""

// name maps a short name to gid; a name two entrypoints share is ambiguous (use the GTS id).
func (rt *runtime) name(short, gid string) {
	if short == "" {
		return
	}
	if prev, ok := rt.names[short]; ok && prev != gid {
		rt.names[short] = ambiguous
		return
	}
	rt.names[short] = gid
}

// resolve maps a short name, manifest base name or GTS id to an entrypoint id.
func (rt *runtime) resolve(name string) (string, error) {
	if gid, ok := rt.names[name]; ok {
		if gid == ambiguous {
			return "", fmt.Errorf("%q names several entrypoints of this folder: use the GTS id", name)
		}
		return gid, nil
	}
	if strings.HasPrefix(name, "gts.") {
		return name, nil
	}
	known := make([]string, 0, len(rt.names))
	for k := range rt.names {
		if !strings.HasPrefix(k, "gts.") {
			known = append(known, k)
		}
	}
	sort.Strings(known)
	return "", fmt.Errorf("no entrypoint named %q in this folder (known: %s)", name, strings.Join(known, ", "))
}

// settle runs everything runnable now, as the dispatcher, the schedulers and the trigger flusher
// would, until nothing is left to run at the current (fake) time.
func (rt *runtime) settle(ctx context.Context) error {
	for round := 0; round < maxRounds; round++ {
		fired, err := rt.srv.Schedules.FireDue(ctx)
		if err != nil {
			return fmt.Errorf("schedules: %w", err)
		}
		flushed, err := rt.srv.Triggers.FlushDue(ctx)
		if err != nil {
			return fmt.Errorf("triggers: %w", err)
		}
		claimed, err := rt.srv.Claims.Claim(ctx, 16)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		for _, a := range claimed {
			rt.srv.Invoke.Runner().Run(ctx, a)
		}
		if fired == 0 && flushed == 0 && len(claimed) == 0 {
			return nil
		}
	}
	return fmt.Errorf("still running after %d rounds (a loop of invocations?)", maxRounds)
}

// nextDue is the earliest future time at which queued work becomes runnable or a schedule fires
// (nil: none), so that moving the clock stops at each of them in turn.
func (rt *runtime) nextDue(ctx context.Context) (*time.Time, error) {
	now := rt.clock.Now()
	due, err := rt.srv.Store.NextDue(ctx, now)
	if err != nil {
		return nil, err
	}
	sch, err := rt.srv.Store.NextScheduleDue(ctx)
	if err != nil {
		return nil, err
	}
	if sch != nil && sch.After(now) && (due == nil || sch.Before(*due)) {
		due = sch
	}
	return due, nil
}

// advance moves the clock forward by d, stopping at every due time on the way so that timers fire
// in order and at their time.
func (rt *runtime) advance(ctx context.Context, d time.Duration) error {
	target := rt.clock.Now().Add(d)
	if err := rt.settle(ctx); err != nil {
		return err
	}
	for i := 0; i < maxRounds; i++ {
		due, err := rt.nextDue(ctx)
		if err != nil {
			return err
		}
		next := target
		if due != nil && due.Before(target) {
			next = *due
		}
		if next.After(rt.clock.Now()) {
			rt.clock.Set(next)
		}
		if err := rt.settle(ctx); err != nil {
			return err
		}
		if !rt.clock.Now().Before(target) {
			return nil
		}
	}
	return fmt.Errorf("advance: more than %d timers on the way", maxRounds)
}

// runUntilBlocked settles, then keeps moving the clock to the next due time while an invocation
// is in flight and that time comes before every pending event wait's timeout: it stops when
// everything has ended, or when what is left waits for an event (which only the test can send, or
// t.advance time out).
func (rt *runtime) runUntilBlocked(ctx context.Context) error {
	for i := 0; i < maxAutoAdvances; i++ {
		if err := rt.settle(ctx); err != nil {
			return err
		}
		inFlight, eventDeadline, err := rt.inFlight(ctx)
		if err != nil || !inFlight {
			return err
		}
		due, err := rt.nextDue(ctx)
		if err != nil {
			return err
		}
		if due == nil || due.Sub(rt.clock.Now()) > maxAutoAdvance || (eventDeadline != nil && !due.Before(*eventDeadline)) {
			return nil
		}
		rt.clock.Set(*due)
	}
	return fmt.Errorf("crossed more than %d timers (a workflow that never ends?)", maxAutoAdvances)
}

// inFlight reports whether an invocation of the test has not ended, and the earliest timeout of
// the event waits of the suspended ones (nil: none has a timeout, or none waits for an event; a
// wait without timeout blocks for ever, as the far future).
func (rt *runtime) inFlight(ctx context.Context) (bool, *time.Time, error) {
	recs, err := rt.records(ctx)
	if err != nil {
		return false, nil, err
	}
	busy := false
	var deadline *time.Time
	for _, rec := range recs {
		if rec.Status.Terminal() {
			continue // failed too: an on_failure handler is an invocation of its own
		}
		busy = true
		if rec.Status != invocation.StatusSuspended {
			continue
		}
		isEvent, until, err := rt.suspension(ctx, rec.ID)
		if err != nil {
			return false, nil, err
		}
		if !isEvent {
			continue
		}
		if until == nil {
			far := rt.clock.Now().Add(maxAutoAdvance + time.Hour)
			until = &far
		}
		if deadline == nil || until.Before(*deadline) {
			deadline = until
		}
	}
	return busy, deadline, nil
}

// maxRecords bounds the invocations one test may look at.
const maxRecords = 10_000

// records lists the test tenant's invocations.
func (rt *runtime) records(ctx context.Context) ([]invocation.Record, error) {
	var out []invocation.Record
	q := store.ListQuery{Limit: 200}
	for len(out) < maxRecords {
		page, err := rt.srv.Invoke.List(ctx, rt.sc, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if !page.HasMore || page.NextCursor == "" {
			return out, nil
		}
		q.Cursor = page.NextCursor
	}
	return out, nil
}

// suspension reads the last suspended entry of invocation id: whether it waits for an event
// (reason "event <type>") and until when.
func (rt *runtime) suspension(ctx context.Context, id string) (bool, *time.Time, error) {
	_, evs, err := rt.srv.Invoke.Events(ctx, rt.sc, id)
	if err != nil {
		return false, nil, err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != invocation.EventSuspended {
			continue
		}
		var d invocation.Suspended // a suspend control action's Control reads as one without a reason
		if len(evs[i].Data) > 0 {
			var err error
			if d, err = invocation.DecodeData[invocation.Suspended](evs[i]); err != nil {
				return false, nil, err
			}
		}
		return strings.HasPrefix(d.Reason, "event "), d.Until, nil
	}
	return false, nil, nil
}
