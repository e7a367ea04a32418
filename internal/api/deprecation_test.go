package api_test

// Invoking a deprecated entrypoint: the answer carries Deprecation (RFC 9745), Sunset (RFC 8594)
// and a Link to the successor, and the invocation record an ENTRYPOINT_DEPRECATED warning that
// stays on it; an active entrypoint's invocations carry neither.

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestInvokingDeprecatedEntrypointWarns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	src := "def main(ctx, input):\n    return {\"ok\": True}\n"
	old := e.registerActive(t, adm, invFn(t, "dep.old.v1~", src))["entrypoint_id"].(string)
	plain := e.registerActive(t, adm, invFn(t, "dep.plain.v1~", src))["entrypoint_id"].(string)
	bare := e.registerActive(t, adm, invFn(t, "dep.bare.v1~", src))["entrypoint_id"].(string)
	successor := fnPrefix + "vendor.app.dep.new.v1~"

	// An active entrypoint: no headers, no warnings.
	_, r := invCall(t, e, adm, http.StatusOK, obj{"entrypoint_id": plain, "mode": "sync", "params": obj{}}, nil)
	require.Empty(t, r.Header.Get("Deprecation"))
	require.Empty(t, r.Header.Get("Sunset"))
	require.NotContains(t, at(r.Body, "record"), "warnings")

	dep := e.expect(t, http.StatusOK, http.MethodPost, epPath(old)+":status", adm, obj{"action": "deprecate",
		"reason": "use new", "successor_id": successor, "sunset_date": "2027-06-30T00:00:00Z"}).Body
	deprecatedAt, err := time.Parse(time.RFC3339Nano, at(dep, "deprecation")["deprecated_at"].(string))
	require.NoError(t, err)

	for _, mode := range []string{"sync", "async"} {
		want := http.StatusOK
		if mode == "async" {
			want = http.StatusAccepted
		}
		rec, r := invCall(t, e, adm, want, obj{"entrypoint_id": old, "mode": mode, "params": obj{}}, nil)
		require.Equal(t, "@"+strconv.FormatInt(deprecatedAt.Unix(), 10), r.Header.Get("Deprecation"), mode)
		require.Equal(t, "Wed, 30 Jun 2027 00:00:00 GMT", r.Header.Get("Sunset"), mode)
		require.Equal(t, "<"+epPath(successor)+`>; rel="successor-version"`, r.Header.Get("Link"), mode)
		ws := objects(rec["warnings"])
		require.Len(t, ws, 1, "%v", rec)
		require.Equal(t, "ENTRYPOINT_DEPRECATED", ws[0]["code"])
		require.Equal(t, successor, ws[0]["successor_id"])
		require.Equal(t, "use new", ws[0]["reason"])
		require.Equal(t, "2027-06-30T00:00:00Z", ws[0]["sunset_date"])
		require.Contains(t, ws[0]["message"], "is deprecated")
		// The warning is part of the record: GET shows it.
		got := invGet(t, e, adm, invID(rec))
		require.Equal(t, rec["warnings"], got["warnings"], mode)
	}

	// A dry run warns too; without a sunset date or successor, only Deprecation is sent.
	e.expect(t, http.StatusOK, http.MethodPost, epPath(bare)+":status", adm, obj{"action": "deprecate"})
	_, r = invCall(t, e, adm, http.StatusOK, obj{"entrypoint_id": bare, "mode": "sync", "params": obj{}, "dry_run": true}, nil)
	require.NotEmpty(t, r.Header.Get("Deprecation"))
	require.Empty(t, r.Header.Get("Sunset"))
	require.Empty(t, r.Header.Get("Link"))
	require.Len(t, objects(at(r.Body, "record")["warnings"]), 1)
}
