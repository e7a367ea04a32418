package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDocument(t *testing.T) {
	e := Conflict("invalid_transition", "action %q not allowed", "activate").With("current_status", "active")
	e.RetryAfter = 3
	b, err := json.Marshal(e.Doc("/api/x", "corr_1"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, "gts://"+TypeConflict, m["type"])
	require.Equal(t, TypeConflict, m["code"])
	require.Equal(t, float64(http.StatusConflict), m["status"])
	require.Equal(t, "invalid_transition", m["reason"])
	require.Equal(t, float64(3), m["retry_after_seconds"])
	require.Equal(t, "corr_1", m["trace_id"])
}

func TestValidationIssues(t *testing.T) {
	e := Validation("bad", []Issue{{Path: "$.a", Message: "m", Code: "X", Line: 2, Column: 3}})
	require.Equal(t, http.StatusUnprocessableEntity, e.Status)
	b, err := json.Marshal(e.Doc("/", ""))
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"gts://`+TypeValidation+`","title":"Validation Error","status":422,"detail":"bad","instance":"/","code":"`+TypeValidation+`","errors":[{"path":"$.a","message":"m","code":"X","line":2,"column":3}]}`, string(b))
}

func TestFromHidesInternalCauses(t *testing.T) {
	secret := errors.New("dial postgres://user:password@db")
	e := From(fmt.Errorf("wrapped: %w", secret))
	require.Equal(t, http.StatusInternalServerError, e.Status)
	require.NotContains(t, e.Detail, "password")
	b, err := json.Marshal(e.Doc("/", ""))
	require.NoError(t, err)
	require.NotContains(t, string(b), "password")
	require.ErrorIs(t, e, secret, "the cause stays available for logs")
	nf := NotFound("x")
	require.Same(t, nf, From(fmt.Errorf("ctx: %w", nf)))
}
