package quality

import "testing"

func TestGateMatrix(t *testing.T) {
	t.Parallel()
	pass := func(s Severity) Result { return Result{Name: "ok_" + string(s), Severity: s, Passed: true} }
	fail := func(s Severity) Result { return Result{Name: "bad_" + string(s), Severity: s} }
	skipped := Result{Name: "later", Severity: SeverityCritical, Skipped: true}
	tests := []struct {
		name       string
		results    []Result
		quarantine bool
		action     Action
		reason     string
	}{
		{"no checks", nil, false, Allow, "no checks ran"},
		{"all passed", []Result{pass(SeverityInfo), pass(SeverityWarning), pass(SeverityError), pass(SeverityCritical)}, false, Allow, "all 4 check(s) passed"},
		{"all passed, quarantine on", []Result{pass(SeverityCritical)}, true, Allow, "all 1 check(s) passed"},
		{"info failed", []Result{fail(SeverityInfo), pass(SeverityCritical)}, false, Allow, "warning or info check(s) failed: bad_INFO: allowed"},
		{"warning failed", []Result{fail(SeverityWarning)}, true, Allow, "warning or info check(s) failed: bad_WARNING: allowed"},
		{"error failed", []Result{fail(SeverityError), fail(SeverityWarning)}, false, AllowWithWarning, "error check(s) failed: bad_ERROR: the run is flagged"},
		{"error failed, quarantine on", []Result{fail(SeverityError)}, true, AllowWithWarning, "error check(s) failed: bad_ERROR: the run is flagged"},
		{"critical failed", []Result{fail(SeverityError), fail(SeverityCritical), skipped}, false, Block, "critical check(s) failed: bad_CRITICAL: the task fails"},
		{"critical failed, quarantine on", []Result{fail(SeverityCritical), skipped}, true, Quarantine, "critical check(s) failed: bad_CRITICAL: the output is quarantined"},
		{"only skipped", []Result{skipped}, false, Allow, "no checks ran"},
	}
	for _, tt := range tests {
		if d := Gate(tt.results, tt.quarantine); d.Action != tt.action || d.Reason != tt.reason {
			t.Errorf("%s: got %s %q, want %s %q", tt.name, d.Action, d.Reason, tt.action, tt.reason)
		}
	}
}

// TestGateEachSeverity runs a failing check of each severity through Run and Gate.
func TestGateEachSeverity(t *testing.T) {
	t.Parallel()
	want := map[Severity][2]Action{ // without, with quarantine
		SeverityInfo:     {Allow, Allow},
		SeverityWarning:  {Allow, Allow},
		SeverityError:    {AllowWithWarning, AllowWithWarning},
		SeverityCritical: {Block, Quarantine},
	}
	for _, s := range Severities {
		res := runOne(t, `{"name":"has_rows","type":"row_count","path":"$.rows","min":1,"severity":"`+string(s)+`"}`, `{"rows":[]}`, nil)
		if res.Passed || res.Severity != s {
			t.Fatalf("%s: %+v", s, res)
		}
		for i, q := range []bool{false, true} {
			if d := Gate([]Result{res}, q); d.Action != want[s][i] {
				t.Errorf("%s, quarantine %v: %+v", s, q, d)
			}
		}
	}
}
