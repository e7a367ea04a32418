package api_test

// The audit log (001, 002; 000: audit events carry tenant_id, actor and correlation_id): every
// mutation the API offers records exactly one event, with the right type, tenant, actor, resource
// and the request's correlation id, and never a token secret; a refused request records nothing.
// Then GET /audit-events: each $filter field, cursor paging across pages, tenant isolation.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

// auditLog drives mutations and checks what each one recorded.
type auditLog struct {
	t       *testing.T
	e       *env
	clk     *clock.Fake
	seen    map[string]bool // audit event ids recorded so far
	secrets []string        // every bearer secret in play: none may appear in an audit event
	n       int
}

// page follows next_cursor through GET /audit-events with q, limit per page, as tok; it checks the
// paging invariants and returns every item in order.
func (a *auditLog) page(tok string, q url.Values, limit int) []obj {
	a.t.Helper()
	q = cloneValues(q)
	q.Set("limit", fmt.Sprint(limit))
	var out []obj
	ids := map[string]bool{}
	for page := 0; ; page++ {
		require.Less(a.t, page, 1000, "paging does not end")
		r := a.e.expect(a.t, http.StatusOK, http.MethodGet, base+"/audit-events?"+q.Encode(), tok, nil)
		items := r.items()
		require.LessOrEqual(a.t, len(items), limit)
		for _, it := range items {
			id := it["id"].(string)
			require.False(a.t, ids[id], "event %s on two pages", id)
			ids[id] = true
			out = append(out, it)
		}
		pi := r.Body["page_info"].(obj)
		if page > 0 {
			require.NotNil(a.t, pi["prev_cursor"], "a page reached through a cursor has a prev_cursor: %s", r)
		}
		next, _ := pi["next_cursor"].(string)
		if next == "" {
			require.Equal(a.t, false, pi["has_more"], "%s", r)
			return out
		}
		require.Equal(a.t, true, pi["has_more"], "%s", r)
		require.Len(a.t, items, limit, "a page followed by more is full")
		q.Set("cursor", next)
	}
}

// all returns every event tok may see (paging 7 at a time).
func (a *auditLog) all(tok string) []obj { return a.page(tok, url.Values{}, 7) }

// fresh returns the events not seen before and marks them seen.
func (a *auditLog) fresh() []obj {
	a.t.Helper()
	var out []obj
	for _, ev := range a.all(operator) {
		if id := ev["id"].(string); !a.seen[id] {
			a.seen[id] = true
			out = append(out, ev)
		}
	}
	return out
}

// want is what one mutation must record.
type want struct {
	typ, tenant, actor, resourceType, resourceID string
	details                                      obj // members that must be in details (nil: none checked)
}

// send performs a request one second after the previous one, with a correlation id of its own
// (none when corr is false: the server makes one).
func (a *auditLog) send(tok, method, path string, body any, corr bool) (*resp, string) {
	a.t.Helper()
	a.clk.Advance(time.Second)
	a.n++
	hdr := map[string]string{}
	if corr {
		hdr["X-Correlation-Id"] = fmt.Sprintf("corr-audit-%02d", a.n)
	}
	r := a.e.send(a.t, request{method: method, path: path, token: tok, body: body, header: hdr})
	id := r.Header.Get("X-Correlation-Id")
	if corr {
		require.Equal(a.t, hdr["X-Correlation-Id"], id, "the correlation id is echoed")
	}
	require.NotEmpty(a.t, id)
	return r, id
}

// mutate performs the request, requires status, and requires exactly one new audit event, as w
// (computed from the answer) says.
func (a *auditLog) mutate(tok, method, path string, body any, status int, w func(*resp) want) (*resp, obj) {
	a.t.Helper()
	return a.mutateCorr(true, tok, method, path, body, status, w)
}

func (a *auditLog) mutateCorr(corr bool, tok, method, path string, body any, status int, w func(*resp) want) (*resp, obj) {
	a.t.Helper()
	r, corrID := a.send(tok, method, path, body, corr)
	require.Equal(a.t, status, r.Status, "%s %s: %s", method, path, r)
	if tk, ok := r.Body["token"].(string); ok {
		a.secrets = append(a.secrets, tk)
	}
	evs := a.fresh()
	require.Len(a.t, evs, 1, "%s %s records exactly one audit event: %v", method, path, evs)
	ev := evs[0]
	x := w(r)
	require.Equal(a.t, auditBase+x.typ, ev["type"], "%s %s", method, path)
	require.Equal(a.t, x.tenant, ev["tenant_id"], "%s %s: tenant", method, path)
	require.Equal(a.t, x.actor, ev["actor_id"], "%s %s: actor", method, path)
	require.Equal(a.t, x.resourceType, ev["resource_type"], "%s %s", method, path)
	require.Equal(a.t, x.resourceID, ev["resource_id"], "%s %s", method, path)
	require.Equal(a.t, corrID, ev["correlation_id"], "%s %s: the request's correlation id", method, path)
	at, err := time.Parse(time.RFC3339Nano, ev["timestamp"].(string))
	require.NoError(a.t, err)
	require.True(a.t, at.Equal(a.clk.Now()), "%s %s: timestamp %s, want the request's time %s", method, path, at, a.clk.Now())
	require.Regexp(a.t, `^aud_`, ev["id"])
	for k, v := range x.details {
		d, _ := ev["details"].(obj)
		require.Equal(a.t, v, d[k], "%s %s: details.%s in %v", method, path, k, ev["details"])
	}
	a.noSecrets()
	return r, ev
}

// noEvent performs a request that must answer status and record nothing (it is refused, or it
// changes nothing).
func (a *auditLog) noEvent(tok, method, path string, body any, status int) {
	a.t.Helper()
	r, _ := a.send(tok, method, path, body, true)
	require.Equal(a.t, status, r.Status, "%s %s: %s", method, path, r)
	require.Empty(a.t, a.fresh(), "%s %s changed nothing: no audit event", method, path)
}

// noSecrets requires that no secret appears anywhere in the audit log.
func (a *auditLog) noSecrets() {
	a.t.Helper()
	raw, err := json.Marshal(a.all(operator))
	require.NoError(a.t, err)
	for _, s := range a.secrets {
		require.NotContains(a.t, string(raw), s, "a token secret is in the audit log")
	}
}

func TestAuditLog(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk })
	a := &auditLog{t: t, e: e, clk: clk, seen: map[string]bool{}, secrets: []string{operator}}
	tenantEv := func(typ, id string, details obj) func(*resp) want {
		return func(*resp) want {
			return want{typ: typ, tenant: id, actor: "operator", resourceType: "tenant", resourceID: id, details: details}
		}
	}
	tokenEv := func(typ, tenantID, actor, id string) func(*resp) want {
		return func(r *resp) want {
			if id == "" {
				id = r.Body["id"].(string)
			}
			return want{typ: typ, tenant: tenantID, actor: actor, resourceType: "token", resourceID: id}
		}
	}
	epEv := func(typ, tenantID, actor, status string, details obj) func(*resp) want {
		return func(r *resp) want {
			d := obj{"status": status}
			for k, v := range details {
				d[k] = v
			}
			return want{typ: typ, tenant: tenantID, actor: actor, resourceType: "entrypoint", resourceID: r.Body["id"].(string), details: d}
		}
	}
	var epAt = map[string]string{} // entrypoint GTS id → opaque id
	epStatus := func(tok, actor, tenantID, gtsID, action, typ, from, to string) {
		t.Helper()
		_, ev := a.mutate(tok, http.MethodPost, epPath(epAt[gtsID])+":status", obj{"action": action}, http.StatusOK,
			epEv(typ, tenantID, actor, to, obj{"from": from, "to": to, "entrypoint_id": gtsID}))
		require.Equal(t, epAt[gtsID], ev["resource_id"])
	}

	// --- every mutation ---

	// Tenants: enable (with and without a body), patch; disable, enable and replace come later.
	a.mutate(operator, http.MethodPost, tenantPath("acme")+":enable", obj{"quotas": obj{"max_definitions": 50}}, http.StatusOK,
		tenantEv("tenant_enabled.v1~", "acme", obj{"quotas": obj{"max_definitions": 50.0}}))
	a.mutate(operator, http.MethodPost, tenantPath("globex")+":enable", nil, http.StatusOK, tenantEv("tenant_enabled.v1~", "globex", nil))
	a.mutate(operator, http.MethodPatch, tenantPath("acme"), obj{"retention": obj{"audit_log_days": 120}}, http.StatusOK,
		tenantEv("tenant_policy_updated.v1~", "acme", obj{"retention": obj{"audit_log_days": 120.0}}))

	// Tokens: the operator issues, a tenant admin issues and revokes (once without a correlation id
	// of the caller's: the server's own is recorded).
	r, _ := a.mutate(operator, http.MethodPost, base+"/tokens", obj{"tenant_id": "acme", "subject_id": "alice", "roles": []string{"admin"}},
		http.StatusCreated, tokenEv("token_created.v1~", "acme", "operator", ""))
	adm := r.Body["token"].(string)
	r, _ = a.mutate(operator, http.MethodPost, base+"/tokens", obj{"tenant_id": "globex", "subject_id": "gina", "roles": []string{"admin"}},
		http.StatusCreated, tokenEv("token_created.v1~", "globex", "operator", ""))
	gadm := r.Body["token"].(string)
	r, ev := a.mutate(adm, http.MethodPost, base+"/tokens", obj{"tenant_id": "acme", "subject_id": "dana", "roles": []string{"developer"}},
		http.StatusCreated, tokenEv("token_created.v1~", "acme", "alice", ""))
	require.Equal(t, obj{"subject_id": "dana", "roles": []any{"developer"}}, ev["details"], "details: who and which roles, never the secret")
	danaID, dana := r.Body["id"].(string), r.Body["token"].(string)
	r, _ = a.mutate(adm, http.MethodPost, base+"/tokens", obj{"tenant_id": "acme", "subject_id": "dev", "roles": []string{"developer"}},
		http.StatusCreated, tokenEv("token_created.v1~", "acme", "alice", ""))
	dev := r.Body["token"].(string)
	a.mutateCorr(false, adm, http.MethodDelete, base+"/tokens/"+danaID, nil, http.StatusNoContent, tokenEv("token_revoked.v1~", "acme", "alice", danaID))
	a.noEvent(dana, http.MethodPost, base+"/tokens", obj{"tenant_id": "acme", "subject_id": "x", "roles": []string{"viewer"}}, http.StatusUnauthorized)
	a.noEvent(adm, http.MethodPost, base+"/tokens", obj{"tenant_id": "acme", "subject_id": "", "roles": []string{}}, http.StatusUnprocessableEntity)
	a.noEvent(adm, http.MethodDelete, base+"/tokens/tok_nope", nil, http.StatusNotFound)

	// Entrypoints: register, update the draft, every status action, delete a draft, archive by DELETE.
	tax := fnPrefix + "vendor.app.audit.tax.v1~"
	r, _ = a.mutate(adm, http.MethodPost, base+"/entrypoints", fn(t, tax), http.StatusCreated,
		epEv("entrypoint_created.v1~", "acme", "alice", "draft", obj{"entrypoint_id": tax}))
	epAt[tax] = idOf(r.Body)
	a.mutate(adm, http.MethodPut, epPath(epAt[tax]), fn(t, tax, set("title", "Tax v1")), http.StatusOK,
		epEv("entrypoint_updated.v1~", "acme", "alice", "draft", obj{"entrypoint_id": tax}))
	epStatus(adm, "alice", "acme", tax, "activate", "entrypoint_activated.v1~", "draft", "active")
	a.noEvent(adm, http.MethodPut, epPath(epAt[tax]), fn(t, tax), http.StatusConflict) // only drafts change
	a.noEvent(adm, http.MethodPost, epPath(epAt[tax])+":status", obj{"action": "activate"}, http.StatusConflict)
	epStatus(adm, "alice", "acme", tax, "deprecate", "entrypoint_deprecated.v1~", "active", "deprecated")
	epStatus(adm, "alice", "acme", tax, "disable", "entrypoint_disabled.v1~", "deprecated", "disabled")
	epStatus(adm, "alice", "acme", tax, "enable", "entrypoint_enabled.v1~", "disabled", "active")
	epStatus(adm, "alice", "acme", tax, "disable", "entrypoint_disabled.v1~", "active", "disabled")
	epStatus(adm, "alice", "acme", tax, "archive", "entrypoint_archived.v1~", "disabled", "archived")

	draft := fnPrefix + "vendor.app.audit.draft.v1~"
	r, _ = a.mutate(adm, http.MethodPost, base+"/entrypoints", fn(t, draft), http.StatusCreated,
		epEv("entrypoint_created.v1~", "acme", "alice", "draft", nil))
	epAt[draft] = idOf(r.Body)
	a.mutate(adm, http.MethodDelete, epPath(epAt[draft]), nil, http.StatusNoContent, func(*resp) want {
		return want{typ: "entrypoint_deleted.v1~", tenant: "acme", actor: "alice", resourceType: "entrypoint", resourceID: epAt[draft],
			details: obj{"hard_delete": true, "entrypoint_id": draft}}
	})
	live := fnPrefix + "vendor.app.audit.live.v1~"
	r, _ = a.mutate(adm, http.MethodPost, base+"/entrypoints", fn(t, live), http.StatusCreated,
		epEv("entrypoint_created.v1~", "acme", "alice", "draft", nil))
	epAt[live] = idOf(r.Body)
	epStatus(adm, "alice", "acme", live, "activate", "entrypoint_activated.v1~", "draft", "active")
	a.mutate(adm, http.MethodDelete, epPath(epAt[live]), nil, http.StatusOK,
		epEv("entrypoint_deleted.v1~", "acme", "alice", "archived", obj{"archived": true, "forced": false, "in_flight": 0.0}))
	a.noEvent(adm, http.MethodDelete, epPath(epAt[live]), nil, http.StatusOK) // already archived: nothing changes, nothing is recorded

	// Another tenant's and the platform's changes are recorded under their own tenant.
	r, _ = a.mutate(gadm, http.MethodPost, base+"/entrypoints", fn(t, tax), http.StatusCreated,
		epEv("entrypoint_created.v1~", "globex", "gina", "draft", nil))
	globexEp := idOf(r.Body)
	sys := fnPrefix + "vendor.platform.audit.echo.v1~"
	a.mutate(operator, http.MethodPost, base+"/entrypoints", fn(t, sys, set("owner", obj{"owner_type": "system"})), http.StatusCreated,
		epEv("entrypoint_created.v1~", "platform", "operator", "draft", nil))
	a.noEvent(gadm, http.MethodPost, epPath(epAt[tax])+":status", obj{"action": "deprecate"}, http.StatusNotFound) // acme's: 404

	// Disabling a tenant, then enabling it again.
	a.mutate(operator, http.MethodPost, tenantPath("globex")+":disable", nil, http.StatusOK, tenantEv("tenant_disabled.v1~", "globex", nil))
	a.noEvent(gadm, http.MethodPost, base+"/entrypoints", fn(t, draft), http.StatusForbidden) // a disabled tenant changes nothing
	a.noEvent(adm, http.MethodPost, tenantPath("acme")+":disable", nil, http.StatusForbidden) // only the operator
	a.mutate(operator, http.MethodPost, tenantPath("globex")+":enable", nil, http.StatusOK, tenantEv("tenant_enabled.v1~", "globex", nil))

	// Replacing a whole policy (PUT runtime-policy); an invalid one changes nothing.
	policy := obj{"tenant_id": "acme", "enabled": true, "quotas": obj{"max_definitions": 60}, "retention": obj{"execution_history_days": 7, "audit_log_days": 120}}
	a.mutate(operator, http.MethodPut, base+"/tenants/acme/runtime-policy", policy, http.StatusOK,
		tenantEv("tenant_policy_updated.v1~", "acme", obj{"quotas": obj{"max_definitions": 60.0}}))
	a.noEvent(operator, http.MethodPut, base+"/tenants/acme/runtime-policy", obj{"tenant_id": "acme"}, http.StatusUnprocessableEntity)
	a.noEvent(adm, http.MethodPut, base+"/tenants/acme/runtime-policy", policy, http.StatusForbidden)

	// --- reading it back ---
	audits := base + "/audit-events"
	typesOf := func(evs []obj) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev["type"].(string)[len(auditBase):])
		}
		return out
	}
	list := func(tok, filter string) []obj {
		t.Helper()
		return a.page(tok, query("$filter", filter), 200)
	}

	t.Run("isolation: a tenant admin sees its own tenant's events, the operator every tenant's", func(t *testing.T) {
		acme := a.all(adm)
		require.Len(t, acme, 20, "3 tenant, 4 token and 13 entrypoint events")
		for _, ev := range acme {
			require.Equal(t, "acme", ev["tenant_id"], "%v", ev)
		}
		globex := a.all(gadm)
		require.Equal(t, []string{"tenant_enabled.v1~", "token_created.v1~", "entrypoint_created.v1~", "tenant_disabled.v1~", "tenant_enabled.v1~"}, typesOf(globex))
		for _, ev := range globex {
			require.Equal(t, "globex", ev["tenant_id"], "%v", ev)
		}
		everything := a.all(operator)
		require.Len(t, everything, len(acme)+len(globex)+1, "the operator also sees the platform's")
		require.Empty(t, list(adm, "resource_id eq '"+globexEp+"'"), "another tenant's resource: nothing")
		require.Empty(t, list(gadm, "actor_id eq 'alice'"))
		require.Len(t, list(operator, "resource_id eq '"+globexEp+"'"), 1)
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, audits, dev, nil)
	})

	t.Run("filters", func(t *testing.T) {
		require.Equal(t, []string{"created", "updated", "activated", "deprecated", "disabled", "enabled", "disabled", "archived"},
			trimTypes(typesOf(list(adm, "resource_id eq '"+epAt[tax]+"'"))), "one entrypoint's history, in order")
		require.Len(t, list(adm, "type eq '"+auditBase+"token_created.v1~'"), 3, "alice's, dana's and dev's")
		require.Len(t, list(adm, "type eq '"+auditBase+"token_revoked.v1~'"), 1)
		require.Equal(t, []string{"tenant_enabled.v1~", "tenant_policy_updated.v1~", "tenant_policy_updated.v1~"}, typesOf(list(adm, "resource_type eq 'tenant'")))
		require.Len(t, list(adm, "resource_type eq 'token'"), 4)
		byOperator := list(adm, "actor_id eq 'operator'")
		require.Equal(t, []string{"tenant_enabled.v1~", "tenant_policy_updated.v1~", "token_created.v1~", "tenant_policy_updated.v1~"}, typesOf(byOperator))
		require.Len(t, list(adm, "actor_id eq 'alice'"), 16)
		one := list(operator, "correlation_id eq 'corr-audit-03'")
		require.Len(t, one, 1)
		require.Equal(t, auditBase+"tenant_policy_updated.v1~", one[0]["type"])
		both := list(adm, "type in ('"+auditBase+"entrypoint_disabled.v1~', '"+auditBase+"entrypoint_enabled.v1~') and resource_id eq '"+epAt[tax]+"'")
		require.Equal(t, []string{"entrypoint_disabled.v1~", "entrypoint_enabled.v1~", "entrypoint_disabled.v1~"}, typesOf(both))
		// A time window: requests were one second apart from 08:00:01.
		window := list(operator, "timestamp ge 2026-06-01T08:00:04Z and timestamp lt 2026-06-01T08:00:07Z")
		require.Len(t, window, 3)
		for _, ev := range window {
			at, err := time.Parse(time.RFC3339Nano, ev["timestamp"].(string))
			require.NoError(t, err)
			require.False(t, at.Before(time.Date(2026, 6, 1, 8, 0, 4, 0, time.UTC)) || !at.Before(time.Date(2026, 6, 1, 8, 0, 7, 0, time.UTC)), "%v", ev)
		}
		require.Empty(t, list(operator, "timestamp gt "+clk.Now().Format(time.RFC3339Nano)))
		for _, bad := range []string{"tenant_id eq 'acme'", "details eq 'x'", "timestamp eq 'yesterday'", "type eq"} {
			e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, audits+"?"+query("$filter", bad).Encode(), adm, nil)
		}
	})

	t.Run("cursor paging across pages, in either order", func(t *testing.T) {
		whole := ids(a.page(operator, url.Values{}, 200))
		require.Len(t, whole, 26)
		for _, limit := range []int{1, 2, 5, 13} {
			require.Equal(t, whole, ids(a.page(operator, url.Values{}, limit)), "limit %d", limit)
		}
		desc := ids(a.page(operator, query("$orderby", "timestamp desc"), 4))
		slices.Reverse(desc)
		require.Equal(t, whole, desc)
		filtered := a.page(adm, query("$filter", "resource_type eq 'entrypoint'"), 3)
		require.Len(t, filtered, 13)
		// prev_cursor walks back to the same first page.
		first := e.expect(t, http.StatusOK, http.MethodGet, audits+"?limit=3", operator, nil)
		next := first.Body["page_info"].(obj)["next_cursor"].(string)
		second := e.expect(t, http.StatusOK, http.MethodGet, audits+"?"+query("limit", "3", "cursor", next).Encode(), operator, nil)
		prev := second.Body["page_info"].(obj)["prev_cursor"].(string)
		back := e.expect(t, http.StatusOK, http.MethodGet, audits+"?"+query("limit", "3", "cursor", prev).Encode(), operator, nil)
		require.Equal(t, ids(first.items()), ids(back.items()))
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet,
			audits+"?"+query("cursor", next, "$filter", "actor_id eq 'alice'").Encode(), operator, nil)
	})

	a.noSecrets()
	a.secrets = append(a.secrets, adm, gadm, dana, dev)
	a.noSecrets()
}

// trimTypes turns "entrypoint_created.v1~" into "created".
func trimTypes(types []string) []string {
	out := make([]string, 0, len(types))
	for _, s := range types {
		s = s[len("entrypoint_"):]
		out = append(out, s[:len(s)-len(".v1~")])
	}
	return out
}
