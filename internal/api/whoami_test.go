package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWhoami: every token reads who it is, whatever its role; the platform operator has no tenant;
// no token is 401.
func TestWhoami(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant(t, "acme")
	viewer := e.token(t, "acme", "vera", "viewer")
	r := e.expect(t, 200, "GET", base+"/whoami", viewer, nil)
	require.Equal(t, "acme", r.Body["tenant_id"])
	require.Equal(t, "vera", r.Body["subject_id"])
	require.Equal(t, []any{"viewer"}, r.Body["roles"])
	require.Equal(t, false, r.Body["platform_operator"])
	require.Regexp(t, `^tok_`, r.Body["token_id"])

	r = e.expect(t, 200, "GET", base+"/whoami", operator, nil)
	require.Nil(t, r.Body["tenant_id"])
	require.Equal(t, "operator", r.Body["subject_id"])
	require.Equal(t, true, r.Body["platform_operator"])
	require.Nil(t, r.Body["token_id"])

	e.expectProblem(t, 401, "unauthorized", "GET", base+"/whoami", "", nil)
	e.expectProblem(t, 400, "bad_request", "GET", base+"/whoami?x=1", viewer, nil)
}
