package api_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/storetest"
)

func idOf(ep obj) string { return ep["id"].(string) }

// TestEntrypoints covers the registry's success paths: register, read (by opaque and GTS id, with
// and without source), update a draft, validate, versions and major-version resolution.
func TestEntrypoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	dev := e.token(t, "acme", "dana", "developer")

	var tax obj // calculate_tax v1, registered by the first subtest

	t.Run("register answers 201 with Location and the entrypoint", func(t *testing.T) {
		r := e.expect(t, http.StatusCreated, http.MethodPost, base+"/entrypoints", adm, fn(t, taxV1))
		tax = r.Body
		id := idOf(tax)
		require.True(t, strings.HasPrefix(id, "ep_"), "id %q", id)
		require.Equal(t, base+"/entrypoints/"+id, r.Header.Get("Location"))
		require.Equal(t, taxV1, tax["entrypoint_id"])
		require.Equal(t, "draft", tax["status"])
		require.Equal(t, "function", tax["kind"])
		require.Equal(t, "1.0.0", tax["version"])
		require.Equal(t, "Calculate Tax", tax["title"])
		require.Equal(t, "acme", tax["tenant_id"])
		require.Equal(t, obj{"owner_type": "tenant", "id": "acme", "tenant_id": "acme"}, tax["owner"])
		require.Equal(t, []any{"billing", "tax"}, tax["tags"])
		require.NotEmpty(t, tax["created_at"])
		require.Nil(t, tax["activated_at"])
	})

	t.Run("owner defaults to the calling user", func(t *testing.T) {
		ep := e.register(t, dev, fnNamed(t, "owners.mine.v1~", del("owner")))
		require.Equal(t, obj{"owner_type": "user", "id": "dana", "tenant_id": "acme"}, ep["owner"])
		ep = e.register(t, dev, fnNamed(t, "owners.explicit_user.v1~", set("owner", obj{"owner_type": "user"})))
		require.Equal(t, obj{"owner_type": "user", "id": "dana", "tenant_id": "acme"}, ep["owner"])
		ep = e.register(t, dev, fnNamed(t, "owners.team.v1~"))
		require.Equal(t, obj{"owner_type": "tenant", "id": "acme", "tenant_id": "acme"}, ep["owner"])
	})

	t.Run("version patch level is free, major.minor come from the id", func(t *testing.T) {
		ep := e.register(t, adm, fnNamed(t, "versions.patched.v3.2~", set("version", "3.2.7")))
		require.Equal(t, "3.2.7", ep["version"])
		ep = e.register(t, adm, fnNamed(t, "versions.default.v3.2~"))
		require.Equal(t, "3.2.0", ep["version"])
	})

	t.Run("get by opaque id and by GTS id", func(t *testing.T) {
		for _, ref := range []string{idOf(tax), taxV1} {
			got := e.expect(t, http.StatusOK, http.MethodGet, epPath(ref), adm, nil).Body
			require.Equal(t, idOf(tax), got["id"])
			require.Equal(t, taxV1, got["entrypoint_id"])
			require.Equal(t, "draft", got["status"])
		}
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath("ep_does_not_exist"), adm, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(fnPrefix+"vendor.app.billing.nothing.v1~"), adm, nil)
	})

	t.Run("include_source", func(t *testing.T) {
		code := func(ep obj) obj { return at(ep, "implementation.code") }
		got := e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(tax)), adm, nil).Body
		require.NotContains(t, code(got), "source", "source is hidden by default")
		require.Equal(t, "starlark", code(got)["language"])
		for _, v := range []string{"false", "0"} {
			got = e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(tax))+"?include_source="+v, adm, nil).Body
			require.NotContains(t, code(got), "source")
		}
		got = e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(tax))+"?include_source=true", adm, nil).Body
		require.Equal(t, at(fn(t, taxV1), "implementation.code")["source"], code(got)["source"])
		list := e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints?include_source=true", adm, nil)
		require.NotEmpty(t, list.items())
		require.Contains(t, code(list.items()[0]), "source")
		list = e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints", adm, nil)
		require.NotContains(t, code(list.items()[0]), "source")

		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, epPath(idOf(tax))+"?include_source=maybe", adm, nil)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, epPath(idOf(tax))+"?verbose=true", adm, nil)
	})

	t.Run("PUT replaces a draft", func(t *testing.T) {
		ep := e.register(t, adm, fnNamed(t, "drafts.editable.v1~"))
		body := fnNamed(t, "drafts.editable.v1~", set("title", "Edited Title"), set("tags", []string{"edited"}),
			source("def main(ctx, input):\n  return {\"edited\": True}\n"))
		r := e.expect(t, http.StatusOK, http.MethodPut, epPath(idOf(ep)), adm, body)
		require.Equal(t, "Edited Title", r.Body["title"])
		require.Equal(t, idOf(ep), r.Body["id"])
		require.Equal(t, "draft", r.Body["status"])
		got := e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep))+"?include_source=true", adm, nil).Body
		require.Equal(t, "Edited Title", got["title"])
		require.Equal(t, []any{"edited"}, got["tags"])
		require.Contains(t, at(got, "implementation.code")["source"], "edited")
		require.Equal(t, ep["created_at"], got["created_at"])

		// The GTS id cannot change, and an invalid replacement changes nothing.
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, epPath(idOf(ep)), adm,
			fnNamed(t, "drafts.renamed.v1~"))
		requireIssue(t, r, "$.entrypoint_id", "")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, epPath(idOf(ep)), adm,
			fnNamed(t, "drafts.editable.v1~", set("owner", obj{"owner_type": "user"})))
		requireIssue(t, r, "$.owner.owner_type", "OWNERSHIP")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, epPath(idOf(ep)), adm,
			fnNamed(t, "drafts.editable.v1~", del("title")))
		requireIssue(t, r, "$.title", "")
		got = e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), adm, nil).Body
		require.Equal(t, "Edited Title", got["title"])
	})

	t.Run("validate without saving", func(t *testing.T) {
		id := fnPrefix + "vendor.app.billing.dry_run.v1~"
		r := e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, fn(t, id))
		require.Equal(t, true, r.Body["valid"], "%s", r)
		require.Empty(t, r.Body["errors"])
		require.Equal(t, id, at(r.Body, "info")["entrypoint_id"])
		require.Equal(t, "function", at(r.Body, "info")["kind"])
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(id), adm, nil)
	})

	t.Run("validate an existing entrypoint", func(t *testing.T) {
		for _, ref := range []string{idOf(tax), taxV1} {
			r := e.expect(t, http.StatusOK, http.MethodPost, epPath(ref)+":validate", adm, nil)
			require.Equal(t, true, r.Body["valid"], "%s", r)
			require.Equal(t, idOf(tax), r.Body["id"])
			require.Contains(t, r.Body, "warnings")
			require.Contains(t, r.Body, "info")
		}
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, epPath("ep_nope")+":validate", adm, nil)
	})

	t.Run("versions list every version in order", func(t *testing.T) {
		v11 := e.register(t, adm, fn(t, taxV11))
		require.Equal(t, "1.1.0", v11["version"])
		for _, ref := range []string{idOf(tax), taxV11} {
			r := e.expect(t, http.StatusOK, http.MethodGet, epPath(ref)+"/versions", adm, nil)
			items := r.items()
			require.Len(t, items, 2, "%s", r)
			require.Equal(t, []string{idOf(tax), idOf(v11)}, ids(items))
			require.Equal(t, taxV1, items[0]["entrypoint_id"])
			require.Equal(t, "1.0.0", items[0]["version"])
			require.Equal(t, taxV11, items[1]["entrypoint_id"])
			require.Equal(t, "1.1.0", items[1]["version"])
			require.Equal(t, "draft", items[1]["status"])
			require.Equal(t, fnPrefix+"vendor.app.billing.calculate_tax", r.Body["family"])
		}
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath("ep_nope")+"/versions", adm, nil)
	})

	t.Run("major-only id returns the exact registration when it exists", func(t *testing.T) {
		e.status(t, adm, idOf(tax), "activate")
		e.status(t, adm, taxV11, "activate")
		got := e.expect(t, http.StatusOK, http.MethodGet, epPath(taxV1), adm, nil).Body
		require.Equal(t, idOf(tax), got["id"], "…calculate_tax.v1~ is registered itself")
		require.Equal(t, taxV1, got["entrypoint_id"])
	})

	t.Run("major-only id resolves to the latest active minor", func(t *testing.T) {
		fam := fnPrefix + "vendor.app.pricing.quote"
		v21 := e.registerActive(t, adm, fn(t, fam+".v2.1~"))
		v23 := e.registerActive(t, adm, fn(t, fam+".v2.3~"))
		v24 := e.register(t, adm, fn(t, fam+".v2.4~"))
		require.Equal(t, "2.3.0", v23["version"])
		for _, tok := range []string{adm, dev} {
			got := e.expect(t, http.StatusOK, http.MethodGet, epPath(fam+".v2~"), tok, nil).Body
			require.Equal(t, idOf(v23), got["id"], "v2~ must resolve to v2.3, not the draft v2.4")
			require.Equal(t, fam+".v2.3~", got["entrypoint_id"])
		}
		r := e.expect(t, http.StatusOK, http.MethodGet, epPath(fam+".v2~")+"/versions", adm, nil)
		require.Equal(t, []string{idOf(v21), idOf(v23), idOf(v24)}, ids(r.items()))
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(fam+".v3~"), adm, nil)

		// Changes name their target exactly: a major-only id does not resolve for PUT, :status or DELETE.
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPut, epPath(fam+".v2~"), adm, fn(t, fam+".v2.3~"))
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, epPath(fam+".v2~")+":status", adm, obj{"action": "deprecate"})
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, epPath(fam+".v2~"), adm, nil)
		require.Equal(t, "active", e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(v23)), adm, nil).Body["status"])
	})
}

// TestEntrypointValidation covers registration-time validation: 422 with every issue, and the same
// findings from :validate as a 200 report.
func TestEntrypointValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	e.enable(t, "globex", nil)
	src := "implementation.code.source"
	srcPath := "$.implementation.code.source"

	cases := []struct {
		name       string
		body       obj
		path, code string
		line, col  int // for source findings
	}{
		{"unknown top-level field", fn(t, taxV1, set("bogus", 1)), "$.bogus", "UNKNOWN_FIELD", 0, 0},
		{"unknown traits field", fn(t, taxV1, set("traits.bogus", true)), "$.traits.bogus", "UNKNOWN_FIELD", 0, 0},
		{"missing title", fn(t, taxV1, del("title")), "$.title", "MISSING_FIELD", 0, 0},
		{"missing entrypoint_id", fn(t, taxV1, del("entrypoint_id")), "$.entrypoint_id", "", 0, 0},
		{"upper-case entrypoint_id", fn(t, fnPrefix+"vendor.app.billing.CalculateTax.v1~"), "$.entrypoint_id", "INVALID_ENTRYPOINT_ID", 0, 0},
		{"not an entrypoint chain", fn(t, "gts.x.core.serverless.rate_limit.v1~vendor.app.billing.calc.v1~"), "$.entrypoint_id", "INVALID_ENTRYPOINT_ID", 0, 0},
		{"memory_mb 1024", fn(t, taxV1, set("traits.limits.memory_mb", 1024)), "$.traits.limits.memory_mb", "SCHEMA_MISMATCH", 0, 0},
		{"cpu 2", fn(t, taxV1, set("traits.limits.cpu", 2)), "$.traits.limits.cpu", "SCHEMA_MISMATCH", 0, 0},
		{"unknown limits field", fn(t, taxV1, set("traits.limits.gpu", 1)), "$.traits.limits.gpu", "UNKNOWN_FIELD", 0, 0},
		{"unknown rate-limit strategy", fn(t, taxV1, set("traits.rate_limit.strategy",
			"gts.x.core.serverless.rate_limit.v1~x.core.serverless.rate_limit.leaky_bucket.v1~")), "$.traits.rate_limit.strategy", "INVALID_VALUE", 0, 0},
		{"syntax error", fn(t, taxV1, set(src, "def main(ctx, input):\n  return {\"tax\": input.amount * }\n")), srcPath, "SYNTAX_ERROR", 2, 33},
		{"load()", fn(t, taxV1, set(src, "load(\"lib.star\", \"helper\")\ndef main(ctx, input):\n  return 1\n")), srcPath, "FORBIDDEN_BUILTIN", 1, 1},
		{"missing main", fn(t, taxV1, set(src, "def handler(ctx, input):\n  return 1\n")), srcPath, "MISSING_MAIN", 0, 0},
		{"workflow-only helper in a function", fn(t, taxV1, set(src, "def main(ctx, input):\n  r_sleep(1000)\n  return 1\n")), srcPath, "WORKFLOW_ONLY_HELPER", 2, 3},
		{"params is not a JSON schema", fn(t, taxV1, set("schema.params", obj{"type": 12})), "$.schema.params.type", "INVALID_SCHEMA", 0, 0},
		{"workflow without traits.workflow", fn(t, wfPrefix+"vendor.app.orders.process_order.v1~"), "$.traits.workflow", "MISSING_FIELD", 0, 0},
		{"traits.workflow on a function", workflow(t, taxV1), "$.traits.workflow", "KIND_MISMATCH", 0, 0},
		{"system owner from a tenant", fn(t, taxV1, set("owner", obj{"owner_type": "system"})), "$.owner.owner_type", "OWNERSHIP", 0, 0},
		{"owner of another tenant", fn(t, taxV1, set("owner", obj{"owner_type": "tenant", "tenant_id": "globex"})), "$.owner.tenant_id", "OWNERSHIP", 0, 0},
		{"owner id of someone else", fn(t, taxV1, set("owner", obj{"owner_type": "user", "id": "mallory"})), "$.owner.id", "OWNERSHIP", 0, 0},
		{"version not matching the id", fn(t, taxV1, set("version", "2.0.0")), "$.version", "VERSION_MISMATCH", 0, 0},
		{"shared on a tenant-owned entrypoint", fn(t, taxV1, set("shared", true)), "$.shared", "OWNERSHIP", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm, c.body)
			is := requireIssue(t, r, c.path, c.code)
			require.NotEmpty(t, is["code"], "every issue has a code: %s", r)
			for _, x := range r.errors() {
				require.NotEmpty(t, x["path"], "%s", r)
				require.NotEmpty(t, x["message"], "%s", r)
				require.NotEmpty(t, x["code"], "%s", r)
			}
			if c.line > 0 {
				require.EqualValues(t, c.line, is["line"], "%s", r)
				require.EqualValues(t, c.col, is["column"], "%s", r)
			}

			// :validate reports the same finding as a 200 report.
			v := e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, c.body)
			require.Equal(t, false, v.Body["valid"], "%s", v)
			var found obj
			for _, f := range objects(v.Body["errors"]) {
				loc, _ := f["location"].(obj)
				if loc["path"] == c.path {
					found = f
				}
			}
			require.NotNil(t, found, ":validate has no finding at %s: %s", c.path, v)
			require.NotEmpty(t, found["message"])
			if c.code != "" {
				require.Equal(t, c.code, found["code"])
			}
			require.Equal(t, strings.ToUpper(found["code"].(string)), found["code"], "report codes are upper-case")
			require.Equal(t, is["code"], found["code"], "422 issue and report finding agree")
			if c.line > 0 {
				loc := found["location"].(obj)
				require.EqualValues(t, c.line, loc["line"])
				require.EqualValues(t, c.col, loc["column"])
				require.NotEmpty(t, found["source_snippet"])
			}
		})
	}

	t.Run("several errors at once", func(t *testing.T) {
		body := fn(t, taxV1, set("bogus", 1), set("colour", "red"), del("title"), set("traits.limits.memory_mb", 1024),
			set("status", "active"), set(src, "def main(ctx, input)\n  return 1\n"))
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm, body)
		requireIssue(t, r, "$.bogus", "UNKNOWN_FIELD")
		requireIssue(t, r, "$.colour", "UNKNOWN_FIELD")
		requireIssue(t, r, "$.title", "MISSING_FIELD")
		requireIssue(t, r, "$.traits.limits.memory_mb", "SCHEMA_MISMATCH")
		is := requireIssue(t, r, srcPath, "SYNTAX_ERROR")
		require.NotZero(t, is["line"], "%s", r)
		require.Len(t, r.errors(), 5, "%s", r)

		v := e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, body)
		require.Equal(t, false, v.Body["valid"])
		require.Len(t, objects(v.Body["errors"]), 5, "%s", v)
	})

	t.Run("MISSING_TIMEOUT warning", func(t *testing.T) {
		body := fnNamed(t, "net.fetch.v1~", set(src, "def main(ctx, input):\n  resp = r_http_get_v1(\"https://api.example.com/rates\")\n  return resp\n"))
		v := e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, body)
		require.Equal(t, true, v.Body["valid"], "a warning does not make the definition invalid: %s", v)
		warns := objects(v.Body["warnings"])
		require.Len(t, warns, 1, "%s", v)
		require.Equal(t, "MISSING_TIMEOUT", warns[0]["code"])
		require.EqualValues(t, 2, warns[0]["location"].(obj)["line"])
		require.Contains(t, at(v.Body, "info")["detected_features"], "http_client")

		// With timeout_ms there is no warning.
		ok := fnNamed(t, "net.fetch.v1~", set(src, "def main(ctx, input):\n  return r_http_get_v1(\"https://api.example.com/rates\", timeout_ms=500)\n"))
		v = e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, ok)
		require.Empty(t, v.Body["warnings"], "%s", v)

		// Registration succeeds and carries the warning.
		r := e.expect(t, http.StatusCreated, http.MethodPost, base+"/entrypoints", adm, body)
		warns = objects(r.Body["warnings"])
		require.Len(t, warns, 1, "%s", r)
		require.Equal(t, "MISSING_TIMEOUT", warns[0]["code"])
	})

	t.Run("malformed and non-object bodies", func(t *testing.T) {
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, base+"/entrypoints", adm, `{"title": `)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, base+"/entrypoints", adm, `{} {}`)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, base+"/entrypoints", adm, `null`)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, base+"/entrypoints", adm, ``)
		// A member of the wrong type in a status request is located.
		ep := e.register(t, adm, fnNamed(t, "bodies.wrong_type.v1~"))
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, epPath(idOf(ep))+":status", adm, `{"action": 5}`)
		requireIssue(t, r, "$.action", "")
	})

	t.Run("well-formed JSON that is not an object", func(t *testing.T) {
		// 400, or 422 with its issue at the root, whose JSON path is "$".
		for _, body := range []string{`[1,2]`, `"calculate_tax"`, `42`} {
			r := e.do(t, http.MethodPost, base+"/entrypoints", adm, body)
			require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, r.Status, "%s", r)
			for _, is := range r.errors() {
				require.Equal(t, "$", is["path"], "the root's JSON path is \"$\": %s", r)
			}
		}
	})

	t.Run("nothing was saved", func(t *testing.T) {
		r := e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints?limit=200", adm, nil)
		for _, it := range r.items() {
			require.NotEqual(t, taxV1, it["entrypoint_id"], "an invalid registration was stored")
		}
	})
}

// TestEntrypointStatus covers 000's status machine exhaustively, the status request body rules,
// immutability of non-drafts and workflow compensation handler checks.
func TestEntrypointStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")

	statuses := []string{"draft", "active", "deprecated", "disabled", "archived"}
	actions := []string{"activate", "deprecate", "disable", "enable", "archive"}
	path := map[string][]string{ // how to reach each status from a fresh draft
		"draft":      nil,
		"active":     {"activate"},
		"deprecated": {"activate", "deprecate"},
		"disabled":   {"activate", "disable"},
		"archived":   {"activate", "disable", "archive"},
	}
	allowed := map[string]map[string]string{ // 000's transition table
		"draft":      {"activate": "active"},
		"active":     {"deprecate": "deprecated", "disable": "disabled"},
		"deprecated": {"disable": "disabled", "archive": "archived"},
		"disabled":   {"enable": "active", "archive": "archived"},
	}
	reach := func(t *testing.T, name, st string) obj {
		ep := e.register(t, adm, fnNamed(t, "sm."+name+".v1~"))
		for _, a := range path[st] {
			ep = e.status(t, adm, idOf(ep), a)
		}
		require.Equal(t, st, ep["status"])
		return ep
	}

	t.Run("transition table", func(t *testing.T) {
		for _, st := range statuses {
			for _, a := range actions {
				t.Run(st+"/"+a, func(t *testing.T) {
					ep := reach(t, st+"_"+a, st)
					id := idOf(ep)
					r := e.do(t, http.MethodPost, epPath(id)+":status", adm, obj{"action": a})
					if to, ok := allowed[st][a]; ok {
						require.Equal(t, http.StatusOK, r.Status, "%s", r)
						require.Equal(t, to, r.Body["status"])
						require.Equal(t, id, r.Body["id"])
						got := e.expect(t, http.StatusOK, http.MethodGet, epPath(id), adm, nil).Body
						require.Equal(t, to, got["status"])
						switch a {
						case "activate":
							require.NotNil(t, got["activated_at"])
						case "disable":
							require.NotNil(t, got["disabled_at"])
						case "enable":
							require.Nil(t, got["disabled_at"])
						case "archive":
							require.NotNil(t, got["archived_at"])
						case "deprecate":
							require.NotNil(t, got["deprecation"])
						}
						return
					}
					require.Equal(t, http.StatusConflict, r.Status, "%s -%s-> must be 409: %s", st, a, r)
					require.Equal(t, "conflict", problemKind(r))
					require.Equal(t, "invalid_transition", r.Body["reason"], "%s", r)
					require.Equal(t, st, r.Body["current_status"], "%s", r)
					require.Equal(t, a, r.Body["action"], "%s", r)
					got := e.expect(t, http.StatusOK, http.MethodGet, epPath(id), adm, nil).Body
					require.Equal(t, st, got["status"], "a refused transition changes nothing")
				})
			}
		}
	})

	t.Run("unknown action is 422", func(t *testing.T) {
		ep := e.register(t, adm, fnNamed(t, "sm.unknown_action.v1~"))
		for _, body := range []obj{{"action": "publish"}, {"action": ""}, {}} {
			r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, epPath(idOf(ep))+":status", adm, body)
			requireIssue(t, r, "$.action", "")
		}
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, epPath(idOf(ep))+":status", adm,
			obj{"action": "activate", "force": true})
		requireIssue(t, r, "$.force", "")
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, epPath(idOf(ep))+":status", adm, `{"action":`)
		require.Equal(t, "draft", e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), adm, nil).Body["status"])
	})

	t.Run("release_notes go with activate only", func(t *testing.T) {
		ep := e.registerActive(t, adm, fnNamed(t, "sm.notes.v1~"))
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, epPath(idOf(ep))+":status", adm,
			obj{"action": "deprecate", "release_notes": "nope"})
		requireIssue(t, r, "$.release_notes", "")
		require.Equal(t, "active", e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), adm, nil).Body["status"])

		ep = e.register(t, adm, fnNamed(t, "sm.notes2.v1~"))
		r = e.expect(t, http.StatusOK, http.MethodPost, epPath(idOf(ep))+":status", adm, obj{"action": "activate", "release_notes": "First release"})
		require.Equal(t, "First release", r.Body["release_notes"])
		require.Equal(t, "First release", e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), adm, nil).Body["release_notes"])
	})

	t.Run("deprecate stores reason, successor and sunset date", func(t *testing.T) {
		ep := e.registerActive(t, adm, fn(t, taxV1))
		successor := fnPrefix + "vendor.app.billing.calculate_tax.v2~"
		r := e.expect(t, http.StatusOK, http.MethodPost, epPath(idOf(ep))+":status", adm, obj{"action": "deprecate",
			"reason": "Replaced by v2 with improved tax calculation", "successor_id": successor, "sunset_date": "2026-03-01T00:00:00.000Z"})
		for _, got := range []obj{r.Body, e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), adm, nil).Body} {
			require.Equal(t, "deprecated", got["status"])
			d := got["deprecation"].(obj)
			require.Equal(t, "Replaced by v2 with improved tax calculation", d["reason"])
			require.Equal(t, successor, d["successor_id"])
			sunset, err := time.Parse(time.RFC3339Nano, d["sunset_date"].(string))
			require.NoError(t, err)
			require.True(t, sunset.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)), "sunset_date %v", d["sunset_date"])
			require.NotEmpty(t, d["deprecated_at"])
		}
		// Those fields go with deprecate only, and the successor must be an entrypoint id.
		other := e.registerActive(t, adm, fnNamed(t, "sm.deprecate_rules.v1~"))
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, epPath(idOf(other))+":status", adm,
			obj{"action": "disable", "reason": "why"})
		require.NotEmpty(t, r.errors())
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, epPath(idOf(other))+":status", adm,
			obj{"action": "deprecate", "successor_id": "not a gts id"})
		requireIssue(t, r, "$.successor_id", "")
	})

	t.Run("PUT on a non-draft is 409 not_draft", func(t *testing.T) {
		ep := e.registerActive(t, adm, fnNamed(t, "sm.frozen.v1~"))
		r := e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPut, epPath(idOf(ep)), adm,
			fnNamed(t, "sm.frozen.v1~", set("title", "Changed")))
		require.Equal(t, "not_draft", r.Body["reason"])
		require.Equal(t, "active", r.Body["current_status"])
		require.Equal(t, "Calculate Tax", e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), adm, nil).Body["title"])
	})

	t.Run("workflow compensation handlers", func(t *testing.T) {
		wfID := wfPrefix + "vendor.app.orders.process_order.v1~"
		handlerID := fnPrefix + "vendor.app.orders.compensate_order.v1~"
		onFailure := "$.traits.workflow.compensation.on_failure"
		wf := func(handler string) obj {
			return workflow(t, wfID, set("traits.workflow.compensation.on_failure", handler),
				source("def main(ctx, input):\n  r_sleep(10)\n  return {}\n"))
		}

		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm,
			wf(fnPrefix+"vendor.app.orders.no_such_handler.v1~"))
		requireIssue(t, r, onFailure, "")

		handler := e.register(t, adm, fn(t, handlerID, set("schema.params", obj{"$ref": compensationRef})))
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm, wf(handlerID))
		requireIssue(t, r, onFailure, "")

		// An active handler whose params do not accept a CompensationContext is refused too.
		wrong := e.registerActive(t, adm, fnNamed(t, "orders.wrong_handler.v1~"))
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm,
			wf(wrong["entrypoint_id"].(string)))
		requireIssue(t, r, onFailure, "")

		e.status(t, adm, idOf(handler), "activate")

		// on_cancel is checked the same way.
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm,
			workflow(t, wfID, set("traits.workflow.compensation.on_cancel", fnPrefix+"vendor.app.orders.no_such_handler.v1~")))
		requireIssue(t, r, "$.traits.workflow.compensation.on_cancel", "")

		// Another tenant cannot use acme's handler: it does not exist for them.
		other := e.tenant(t, "globex")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", other, wf(handlerID))
		requireIssue(t, r, onFailure, "")

		got := e.register(t, adm, wf(handlerID))
		require.Equal(t, "workflow", got["kind"])
		require.Equal(t, wfID, got["entrypoint_id"])
		require.Equal(t, handlerID, at(got, "traits.workflow.compensation")["on_failure"])
	})
}

// TestEntrypointDelete covers DELETE: hard delete of drafts, archive of the rest, and the in-flight
// guard with ?force=true.
func TestEntrypointDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")

	t.Run("draft is hard-deleted", func(t *testing.T) {
		ep := e.register(t, adm, fnNamed(t, "del.draft.v1~"))
		r := e.expect(t, http.StatusNoContent, http.MethodDelete, epPath(idOf(ep)), adm, nil)
		require.Empty(t, r.Raw)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(idOf(ep)), adm, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(ep["entrypoint_id"].(string)), adm, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, epPath(idOf(ep)), adm, nil)
		// The id is free again.
		e.register(t, adm, fnNamed(t, "del.draft.v1~"))
	})

	t.Run("active is archived", func(t *testing.T) {
		ep := e.registerActive(t, adm, fnNamed(t, "del.active.v1~"))
		r := e.expect(t, http.StatusOK, http.MethodDelete, epPath(idOf(ep)), adm, nil)
		require.Equal(t, "archived", r.Body["status"])
		require.NotNil(t, r.Body["archived_at"])
		got := e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), adm, nil).Body
		require.Equal(t, "archived", got["status"])
		list := e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints?"+query("$filter", "status eq 'archived'").Encode(), adm, nil)
		require.Contains(t, ids(list.items()), idOf(ep))
		// Deleting it again keeps it archived.
		r = e.expect(t, http.StatusOK, http.MethodDelete, epPath(idOf(ep)), adm, nil)
		require.Equal(t, "archived", r.Body["status"])
	})

	t.Run("in-flight invocations block delete unless forced", func(t *testing.T) {
		ep := e.registerActive(t, adm, fnNamed(t, "del.busy.v1~"))
		id := idOf(ep)
		require.NoError(t, e.srv.Store.Update(context.Background(), func(tx store.Tx) error {
			_, err := tx.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_x", "acme", id, time.Now())}, store.Scheduling{})
			return err
		}))
		r := e.expectProblem(t, http.StatusConflict, "conflict", http.MethodDelete, epPath(id), adm, nil)
		require.Equal(t, "in_flight_executions", r.Body["reason"])
		require.EqualValues(t, 1, r.Body["execution_count"])
		require.Equal(t, "active", e.expect(t, http.StatusOK, http.MethodGet, epPath(id), adm, nil).Body["status"])

		e.expectProblem(t, http.StatusConflict, "conflict", http.MethodDelete, epPath(id)+"?force=false", adm, nil)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodDelete, epPath(id)+"?force=please", adm, nil)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodDelete, epPath(id)+"?forse=true", adm, nil)
		r = e.expect(t, http.StatusOK, http.MethodDelete, epPath(id)+"?force=true", adm, nil)
		require.Equal(t, "archived", r.Body["status"])
		require.Equal(t, "archived", e.expect(t, http.StatusOK, http.MethodGet, epPath(id), adm, nil).Body["status"])
	})
}

// TestVisibility covers tenant isolation (404, never 403), user-owned private and shared
// entrypoints, and system entrypoints registered by the operator.
func TestVisibility(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acme := e.tenant(t, "acme")
	globex := e.tenant(t, "globex")
	alice := e.token(t, "acme", "alice", "developer")
	bob := e.token(t, "acme", "bob", "developer")
	eps := base + "/entrypoints"

	// every way of touching an entrypoint by reference
	touch := func(t *testing.T, tok, ref string) map[string]*resp {
		body := fn(t, taxV1, set("title", "Hijacked"))
		return map[string]*resp{
			"GET":       e.do(t, http.MethodGet, epPath(ref), tok, nil),
			"PUT":       e.do(t, http.MethodPut, epPath(ref), tok, body),
			":status":   e.do(t, http.MethodPost, epPath(ref)+":status", tok, obj{"action": "activate"}),
			":validate": e.do(t, http.MethodPost, epPath(ref)+":validate", tok, nil),
			"DELETE":    e.do(t, http.MethodDelete, epPath(ref), tok, nil),
			"versions":  e.do(t, http.MethodGet, epPath(ref)+"/versions", tok, nil),
		}
	}

	t.Run("other tenants get 404 for everything", func(t *testing.T) {
		ep := e.register(t, acme, fn(t, taxV1))
		for _, ref := range []string{idOf(ep), taxV1} {
			for op, r := range touch(t, globex, ref) {
				require.Equal(t, http.StatusNotFound, r.Status, "%s %s as globex: %s", op, ref, r)
				require.Equal(t, "not_found", problemKind(r))
			}
		}
		got := e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), acme, nil).Body
		require.Equal(t, "draft", got["status"], "globex changed nothing")
		require.Equal(t, "Calculate Tax", got["title"])

		list := e.expect(t, http.StatusOK, http.MethodGet, eps+"?limit=200", globex, nil)
		require.NotContains(t, ids(list.items()), idOf(ep))

		// globex may register the same GTS id; each tenant sees its own.
		theirs := e.register(t, globex, fn(t, taxV1))
		require.NotEqual(t, idOf(ep), idOf(theirs))
		require.Equal(t, idOf(ep), e.expect(t, http.StatusOK, http.MethodGet, epPath(taxV1), acme, nil).Body["id"])
		require.Equal(t, idOf(theirs), e.expect(t, http.StatusOK, http.MethodGet, epPath(taxV1), globex, nil).Body["id"])
		vs := e.expect(t, http.StatusOK, http.MethodGet, epPath(taxV1)+"/versions", globex, nil)
		require.Equal(t, []string{idOf(theirs)}, ids(vs.items()))
	})

	t.Run("same tenant registering the same id twice is 409", func(t *testing.T) {
		id := fnPrefix + "vendor.app.dupes.twice.v1~"
		e.register(t, acme, fn(t, id))
		r := e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, eps, acme, fn(t, id))
		require.Equal(t, "already_exists", r.Body["reason"])
		r = e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, eps, alice, fn(t, id, del("owner")))
		require.Equal(t, "already_exists", r.Body["reason"])
		// …v1~ and …v1.0~ are the same version.
		r = e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, eps, acme, fn(t, fnPrefix+"vendor.app.dupes.twice.v1.0~"))
		require.Equal(t, "already_exists", r.Body["reason"])
		// Archived entrypoints keep their id.
		arch := e.registerActive(t, acme, fn(t, fnPrefix+"vendor.app.dupes.archived.v1~"))
		e.expect(t, http.StatusOK, http.MethodDelete, epPath(idOf(arch)), acme, nil)
		e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, eps, acme, fn(t, fnPrefix+"vendor.app.dupes.archived.v1~"))
	})

	t.Run("user-owned private entrypoint is invisible to others in the tenant", func(t *testing.T) {
		ep := e.register(t, alice, fnNamed(t, "private.alice_fn.v1~", del("owner")))
		require.Equal(t, "user", ep["owner"].(obj)["owner_type"])
		for op, r := range touch(t, bob, idOf(ep)) {
			require.Equal(t, http.StatusNotFound, r.Status, "%s as bob: %s", op, r)
		}
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(ep["entrypoint_id"].(string)), bob, nil)
		require.NotContains(t, ids(e.expect(t, http.StatusOK, http.MethodGet, eps+"?limit=200", bob, nil).items()), idOf(ep))
		require.Contains(t, ids(e.expect(t, http.StatusOK, http.MethodGet, eps+"?limit=200", alice, nil).items()), idOf(ep))
		e.expect(t, http.StatusOK, http.MethodGet, epPath(idOf(ep)), alice, nil)
	})

	t.Run("shared user-owned entrypoint is readable, not changeable, by others", func(t *testing.T) {
		ep := e.register(t, alice, fnNamed(t, "private.alice_shared.v1~", del("owner"), set("shared", true)))
		require.Equal(t, true, ep["shared"])
		id := idOf(ep)
		got := e.expect(t, http.StatusOK, http.MethodGet, epPath(id), bob, nil).Body
		require.Equal(t, id, got["id"])
		require.Contains(t, ids(e.expect(t, http.StatusOK, http.MethodGet, eps+"?limit=200", bob, nil).items()), id)
		e.expect(t, http.StatusOK, http.MethodGet, epPath(id)+"/versions", bob, nil)
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPut, epPath(id), bob,
			fnNamed(t, "private.alice_shared.v1~", del("owner"), set("shared", true), set("title", "Bob was here")))
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, epPath(id)+":status", bob, obj{"action": "activate"})
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodDelete, epPath(id), bob, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(id), globex, nil)
		// alice still can.
		e.status(t, alice, id, "activate")
	})

	t.Run("system entrypoints are visible to every tenant and changed only by the operator", func(t *testing.T) {
		sysID := fnPrefix + "vendor.platform.util.echo.v1~"
		r := e.expect(t, http.StatusCreated, http.MethodPost, eps, operator, fn(t, sysID, set("owner", obj{"owner_type": "system"})))
		sys := r.Body
		require.Equal(t, "system", sys["owner"].(obj)["owner_type"])
		id := idOf(sys)

		// Without an owner, the operator registers system entrypoints too; it cannot register tenant ones.
		sys2 := e.register(t, operator, fn(t, fnPrefix+"vendor.platform.util.echo2.v1~", del("owner")))
		require.Equal(t, "system", sys2["owner"].(obj)["owner_type"])
		e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, eps, operator,
			fn(t, fnPrefix+"vendor.platform.util.echo3.v1~"))

		viewer := e.token(t, "globex", "vic", "viewer")
		tenants := map[string]string{"acme": acme, "globex": globex, "alice": alice, "viewer": viewer}

		// A system draft is the operator's work in progress: tenants do not see it yet.
		for name, tok := range tenants {
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(id), tok, nil)
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, epPath(sysID), tok, nil)
			require.NotContains(t, ids(e.expect(t, http.StatusOK, http.MethodGet, eps+"?limit=200", tok, nil).items()), id, name)
		}
		for op, r := range touch(t, acme, id) {
			require.Equal(t, http.StatusNotFound, r.Status, "%s on a system draft as a tenant: %s", op, r)
		}
		// A tenant cannot register an id that exists at platform scope, even as a draft.
		r = e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, eps, acme, fn(t, sysID))
		require.Equal(t, "already_exists", r.Body["reason"])
		// The operator can change it, and activate it.
		e.expect(t, http.StatusOK, http.MethodPut, epPath(id), operator, fn(t, sysID, set("owner", obj{"owner_type": "system"}), set("title", "Echo")))
		require.Equal(t, "active", e.status(t, operator, id, "activate")["status"])

		for name, tok := range tenants {
			for _, ref := range []string{id, sysID} {
				got := e.expect(t, http.StatusOK, http.MethodGet, epPath(ref), tok, nil).Body
				require.Equal(t, id, got["id"], "%s reads the system entrypoint", name)
			}
			require.Contains(t, ids(e.expect(t, http.StatusOK, http.MethodGet, eps+"?limit=200", tok, nil).items()), id, name)
		}
		for name, tok := range map[string]string{"acme admin": acme, "globex admin": globex, "alice": alice} {
			e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPut, epPath(id), tok, fn(t, sysID, set("title", "Mine now")))
			e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, epPath(id)+":status", tok, obj{"action": "disable"})
			e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodDelete, epPath(id), tok, nil)
			require.Equal(t, "active", e.expect(t, http.StatusOK, http.MethodGet, epPath(id), tok, nil).Body["status"], name)
		}
		for _, tok := range []string{acme, globex} {
			r := e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, eps, tok, fn(t, sysID))
			require.Equal(t, "already_exists", r.Body["reason"])
		}
		// Only the operator changes it.
		require.Equal(t, "deprecated", e.status(t, operator, id, "deprecate")["status"])
		require.Equal(t, "deprecated", e.expect(t, http.StatusOK, http.MethodGet, epPath(id), globex, nil).Body["status"])
	})

	t.Run("operator cannot register a system id that a tenant already has", func(t *testing.T) {
		id := fnPrefix + "vendor.app.taken.by_acme.v1~"
		e.register(t, acme, fn(t, id))
		r := e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, eps, operator, fn(t, id, set("owner", obj{"owner_type": "system"})))
		require.Equal(t, "already_exists", r.Body["reason"])
	})
}

// TestLists covers list pagination, list parameter errors, filters and ordering.
func TestLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	dev := e.token(t, "acme", "dana", "developer")
	eps := base + "/entrypoints"

	alpha := e.registerActive(t, adm, fnNamed(t, "lists.alpha.v1~", set("tags", []string{"billing"})))
	beta := e.register(t, dev, fnNamed(t, "lists.beta.v1~", del("owner"), set("tags", []string{"tax"})))
	beta11 := e.registerActive(t, adm, fnNamed(t, "lists.beta.v1.1~", set("tags", []string{"tax", "billing"})))
	gamma := e.register(t, adm, fnNamed(t, "other.gamma.v1~", set("tags", []string{})))
	delta := e.register(t, adm, workflow(t, wfPrefix+"vendor.app.lists.delta.v1~", set("tags", []string{"billing"})))
	all := []obj{alpha, beta, beta11, gamma, delta}
	allIDs := ids(all)

	t.Run("pagination visits every entrypoint once, forwards and back", func(t *testing.T) {
		var pages [][]string
		var prevs []string
		q := query("limit", "2")
		for i := 0; i < 10; i++ {
			r := e.expect(t, http.StatusOK, http.MethodGet, eps+"?"+q.Encode(), dev, nil)
			pi := r.Body["page_info"].(obj)
			require.EqualValues(t, 2, pi["limit"])
			pages = append(pages, ids(r.items()))
			prev, _ := pi["prev_cursor"].(string)
			prevs = append(prevs, prev)
			next, _ := pi["next_cursor"].(string)
			if next == "" {
				require.Equal(t, false, pi["has_more"])
				break
			}
			require.Equal(t, true, pi["has_more"])
			q.Set("cursor", next)
		}
		require.Equal(t, [][]string{allIDs[0:2], allIDs[2:4], allIDs[4:5]}, pages, "default order is created_at")
		require.Empty(t, prevs[0], "the first page has no prev_cursor")
		require.NotEmpty(t, prevs[1])
		require.NotEmpty(t, prevs[2])
		for i := 2; i >= 1; i-- {
			r := e.expect(t, http.StatusOK, http.MethodGet, eps+"?"+query("limit", "2", "cursor", prevs[i]).Encode(), dev, nil)
			require.Equal(t, pages[i-1], ids(r.items()), "prev_cursor of page %d returns page %d", i+1, i)
			pi := r.Body["page_info"].(obj)
			require.Equal(t, true, pi["has_more"])
			require.NotEmpty(t, pi["next_cursor"])
			if i == 1 {
				require.Nil(t, pi["prev_cursor"], "back on the first page there is no prev_cursor: %s", r)
			}
		}
		require.ElementsMatch(t, allIDs, e.listAll(t, dev, query("limit", "1")))
	})

	t.Run("bad list parameters are 400", func(t *testing.T) {
		other := e.expect(t, http.StatusOK, http.MethodGet, eps+"?"+query("limit", "1", "$filter", "status eq 'draft'").Encode(), dev, nil)
		foreign := other.Body["page_info"].(obj)["next_cursor"].(string)
		cases := []struct {
			name   string
			q      url.Values
			detail string
		}{
			{"limit 0", query("limit", "0"), "limit"},
			{"limit 201", query("limit", "201"), "limit"},
			{"limit not a number", query("limit", "ten"), "limit"},
			{"unknown parameter", query("page", "2"), "page"},
			{"$filter syntax error", query("$filter", "status eq"), "position"},
			{"$filter unterminated string", query("$filter", "status eq 'active"), "position"},
			{"$filter unknown field", query("$filter", "colour eq 'red'"), "colour"},
			{"$filter bad enum value", query("$filter", "status eq 'sleeping'"), ""},
			{"$orderby not sortable", query("$orderby", "title,tags"), "tags"},
			{"$orderby unknown field", query("$orderby", "colour desc"), "colour"},
			{"garbage cursor", query("cursor", "not-a-cursor!!"), ""},
			{"cursor of another query", query("cursor", foreign), ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, eps+"?"+c.q.Encode(), dev, nil)
				require.Contains(t, r.Body["detail"], c.detail, "%s", r)
			})
		}
	})

	t.Run("filters and ordering", func(t *testing.T) {
		fam := fnPrefix + "vendor.app.lists.beta"
		cases := []struct {
			name   string
			q      url.Values
			want   []obj
			sorted bool // want is in the expected order
		}{
			{"status active", query("$filter", "status eq 'active'"), []obj{alpha, beta11}, false},
			{"status draft", query("$filter", "status eq 'draft'"), []obj{beta, gamma, delta}, false},
			{"status ne draft", query("$filter", "status ne 'draft'"), []obj{alpha, beta11}, false},
			{"status in", query("$filter", "status in ('active', 'archived')"), []obj{alpha, beta11}, false},
			{"tags", query("$filter", "tags eq 'billing'"), []obj{alpha, beta11, delta}, false},
			{"status and tags", query("$filter", "status eq 'active' and tags eq 'billing'"), []obj{alpha, beta11}, false},
			{"or", query("$filter", "tags eq 'tax' or kind eq 'workflow'"), []obj{beta, beta11, delta}, false},
			{"not", query("$filter", "not (tags eq 'billing')"), []obj{beta, gamma}, false},
			{"owner_type user", query("$filter", "owner_type eq 'user'"), []obj{beta}, false},
			{"owner_type tenant", query("$filter", "owner_type eq 'tenant'"), []obj{alpha, beta11, gamma, delta}, false},
			{"kind workflow", query("$filter", "kind eq 'workflow'"), []obj{delta}, false},
			{"adapter starlark", query("$filter", "adapter eq '"+starlarkAdapter+"'"), all, false},
			{"adapter lambda", query("$filter", "adapter eq 'gts.x.core.serverless.adapter.lambda.v1~'"), nil, false},
			{"entrypoint_id family wildcard", query("$filter", "entrypoint_id eq '"+fam+".*'"), []obj{beta, beta11}, false},
			{"entrypoint_id minor wildcard", query("$filter", "entrypoint_id eq '"+fam+".v1.*'"), []obj{beta, beta11}, false},
			{"entrypoint_id exact", query("$filter", "entrypoint_id eq '"+fam+".v1.1~'"), []obj{beta11}, false},
			{"startswith", query("$filter", "startswith(entrypoint_id, '"+fnPrefix+"vendor.app.lists.')"), []obj{alpha, beta, beta11}, false},
			{"orderby entrypoint_id desc", query("$orderby", "entrypoint_id desc"), sortedByGTS(all, true), true},
			{"orderby entrypoint_id asc", query("$orderby", "entrypoint_id"), sortedByGTS(all, false), true},
			{"orderby created_at desc", query("$orderby", "created_at desc"), []obj{delta, gamma, beta11, beta, alpha}, true},
			{"filter and orderby", query("$filter", "tags eq 'billing'", "$orderby", "entrypoint_id desc"),
				sortedByGTS([]obj{alpha, beta11, delta}, true), true},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.expect(t, http.StatusOK, http.MethodGet, eps+"?"+c.q.Encode(), dev, nil)
				got := ids(r.items())
				if c.sorted {
					require.Equal(t, ids(c.want), got)
				} else {
					require.ElementsMatch(t, ids(c.want), got)
				}
				// Paging through the same query with limit=1 gives the same result.
				q := cloneValues(c.q)
				q.Set("limit", "1")
				paged := e.listAll(t, dev, q)
				if c.sorted {
					require.Equal(t, got, paged)
					checkPagingBothWays(t, e, dev, c.q, got)
				} else {
					require.ElementsMatch(t, got, paged)
				}
			})
		}
	})

	t.Run("empty list", func(t *testing.T) {
		tok := e.tenant(t, "empty")
		r := e.expect(t, http.StatusOK, http.MethodGet, eps, tok, nil)
		require.Equal(t, []any{}, r.Body["items"])
		pi := r.Body["page_info"].(obj)
		require.Nil(t, pi["next_cursor"])
		require.Nil(t, pi["prev_cursor"])
		require.Equal(t, false, pi["has_more"])
		require.EqualValues(t, 25, pi["limit"])
	})
}

// checkPagingBothWays pages through q with limit=2 and checks that every prev_cursor returns the
// page before, in the same order.
func checkPagingBothWays(t *testing.T, e *env, tok string, q url.Values, want []string) {
	t.Helper()
	q = cloneValues(q)
	q.Set("limit", "2")
	var pages [][]string
	var prevs []string
	for i := 0; i < 100; i++ {
		r := e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints?"+q.Encode(), tok, nil)
		pi := r.Body["page_info"].(obj)
		pages = append(pages, ids(r.items()))
		p, _ := pi["prev_cursor"].(string)
		prevs = append(prevs, p)
		next, _ := pi["next_cursor"].(string)
		if next == "" {
			break
		}
		q.Set("cursor", next)
	}
	var flat []string
	for _, p := range pages {
		flat = append(flat, p...)
	}
	require.Equal(t, want, flat)
	for i := 1; i < len(pages); i++ {
		q.Set("cursor", prevs[i])
		r := e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints?"+q.Encode(), tok, nil)
		require.Equal(t, pages[i-1], ids(r.items()), "prev_cursor of page %d", i+1)
	}
}

func sortedByGTS(list []obj, desc bool) []obj {
	out := slices.Clone(list)
	slices.SortFunc(out, func(a, b obj) int {
		c := strings.Compare(a["entrypoint_id"].(string), b["entrypoint_id"].(string))
		if desc {
			return -c
		}
		return c
	})
	return out
}
