package quality

import (
	"encoding/json"
	"strings"
	"testing"
)

// customCheck is the JSON of a custom check of source (Go string, JSON-escaped here).
func customCheck(t *testing.T, source string, timeoutMS int) string {
	t.Helper()
	src, err := json.Marshal(source)
	if err != nil {
		t.Fatal(err)
	}
	c := `{"name":"x","type":"custom","severity":"CRITICAL","source":` + string(src)
	if timeoutMS > 0 {
		c += `,"timeout_ms":` + strings.TrimSpace(string(mustJSON(t, timeoutMS)))
	}
	return c + "}"
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCustomCheckSandbox(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, source string
		timeoutMS    int
		passed       bool
		msg          string
	}{
		{"infinite loop", "def check(output, previous):\n    while True:\n        pass\n", 300, false, "timed out"},
		{"recursion", "def check(output, previous):\n    return check(output, previous)\n", 300, false, "check"},
		{"memory bomb", "def check(output, previous):\n    return len(\"x\" * (1 << 30)) > 0\n", 0, false, "custom check exceeded its memory limit (64 MiB)"},
		{"growing list", "def check(output, previous):\n    l = []\n    for i in range(1 << 30):\n        l.append(str(i) * 100000)\n    return True\n", 5000, false, "custom check exceeded its memory limit (64 MiB)"},
		{"no egress", "def check(output, previous):\n    return r_http_get_v1(\"http://127.0.0.1:1/\").result().ok\n", 0, false, "custom check failed"},
		{"fail", "def check(output, previous):\n    fail(\"boom\")\n", 0, false, "custom check failed: runtime: fail: boom (line 2)"},
		{"wrong result", "def check(output, previous):\n    return 1\n", 0, false, "custom check must return a bool or a tuple (bool, message)"},
		{"wrong tuple", "def check(output, previous):\n    return (True, 1)\n", 0, false, "custom check must return a bool or a tuple (bool, message)"},
		{"clock", "def check(output, previous):\n    return (True, r_now_v1())\n", 0, true, "2026-03-01T12:00:00"},
		{"long message", "def check(output, previous):\n    return (False, \"é\" * 2000)\n", 0, false, "éé…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runOne(t, customCheck(t, tt.source, tt.timeoutMS), `{"rows":[]}`, nil)
			if res.Passed != tt.passed || !strings.Contains(res.Message, tt.msg) {
				t.Errorf("got passed=%v %q, want passed=%v %q", res.Passed, res.Message, tt.passed, tt.msg)
			}
			if len(res.Message) > maxMessageBytes {
				t.Errorf("message of %d bytes", len(res.Message))
			}
			if tt.timeoutMS > 0 && res.DurationMS > int64(tt.timeoutMS)+2000 {
				t.Errorf("ran %d ms with a timeout of %d ms", res.DurationMS, tt.timeoutMS)
			}
		})
	}
}
