package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/problem"
)

// TestUnencodableAnswerIsAProblem: a response value that cannot be encoded answers a 500 problem
// document (not net/http's plain text), and the log line carries the cause and correlation id.
func TestUnencodableAnswerIsAProblem(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := New(Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	h := s.telemetry(s.correlate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeJSON(w, r, http.StatusOK, map[string]any{"details": json.RawMessage(`{}{}`)})
	})))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set("X-Correlation-Id", "corr-test-1")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, problemJSON, rec.Header().Get("Content-Type"))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc), rec.Body.String())
	require.Equal(t, problem.TypeInternal, doc["code"])
	require.Regexp(t, "^[0-9a-f]{32}$", doc["trace_id"])
	require.Contains(t, logs.String(), `"correlation_id":"corr-test-1"`)
	require.Contains(t, logs.String(), "encoding the response")
}
