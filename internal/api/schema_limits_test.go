package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/schema"
)

// nestedAllOfObj is schema.params made of n nested allOf.
func nestedAllOfObj(t *testing.T, n int) obj {
	t.Helper()
	var o obj
	require.NoError(t, json.Unmarshal([]byte(strings.Repeat(`{"allOf":[`, n)+`{"type":"object"}`+strings.Repeat(`]}`, n)), &o))
	return o
}

// TestSchemaTooComplex: a params schema nested past the limit is refused at registration (422) and
// reported by :validate with SCHEMA_TOO_COMPLEX at the first subschema too deep, quickly; one at the
// limit registers.
func TestSchemaTooComplex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	over := fn(t, taxV1, set("schema.params", nestedAllOfObj(t, schema.MaxUserSchemaDepth+1)))
	path := "$.schema.params" + strings.Repeat(".allOf[0]", schema.MaxUserSchemaDepth+1)

	start := time.Now()
	r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm, over)
	requireIssue(t, r, path, "SCHEMA_TOO_COMPLEX")

	r = e.expect(t, http.StatusOK, http.MethodPost, base+"/entrypoints:validate", adm, over)
	require.Equal(t, false, r.Body["valid"], "%s", r)
	var found bool
	for _, f := range r.Body["errors"].([]any) {
		f := f.(obj)
		if f["code"] == "SCHEMA_TOO_COMPLEX" && f["location"].(obj)["path"] == path {
			found = true
		}
	}
	require.True(t, found, "%s", r)
	require.Less(t, time.Since(start), 10*time.Second, "refused before compiling (before: 60 s)")

	e.expect(t, http.StatusCreated, http.MethodPost, base+"/entrypoints", adm,
		fn(t, taxV1, set("schema.params", nestedAllOfObj(t, schema.MaxUserSchemaDepth))))
}
