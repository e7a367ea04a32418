package quality

import (
	"fmt"
	"strings"
)

// Action is what a task's check results do to the task and its run (004 §6.3).
type Action string

// Gating actions.
const (
	// Allow: every check passed, or only INFO and WARNING checks failed (logged). The task
	// succeeds and its output is promoted.
	Allow Action = "ALLOW"
	// AllowWithWarning: an ERROR check failed. The task succeeds, its output is promoted, and the
	// run gets a warning flag.
	AllowWithWarning Action = "ALLOW_WITH_WARNING"
	// Block: a CRITICAL check failed. The task fails and its dependents are skipped.
	Block Action = "BLOCK"
	// Quarantine: a CRITICAL check failed and the task has quarantine_enabled. The output is
	// isolated (never promoted unless approved) and dependents read the previous good one.
	Quarantine Action = "QUARANTINE"
)

// Decision is the gating decision of a task's check results, with the reason for people.
type Decision struct {
	Action Action `json:"action"`
	Reason string `json:"reason"`
}

// Gate decides what results mean for their task (004 §6.3's matrix): a failed CRITICAL check
// blocks the task, or quarantines its output when quarantineEnabled; a failed ERROR check lets it
// succeed with a warning on the run; failed WARNING and INFO checks, and skipped checks, do not
// change anything. The most severe failure decides; the reason names the checks that decided.
func Gate(results []Result, quarantineEnabled bool) Decision {
	failedBy := map[Severity][]string{}
	run := 0
	for _, r := range results {
		if r.Skipped {
			continue
		}
		run++
		if !r.Passed {
			failedBy[r.Severity] = append(failedBy[r.Severity], r.Name)
		}
	}
	switch {
	case len(failedBy[SeverityCritical]) > 0 && quarantineEnabled:
		return Decision{Quarantine, reason("critical", failedBy[SeverityCritical]) + ": the output is quarantined"}
	case len(failedBy[SeverityCritical]) > 0:
		return Decision{Block, reason("critical", failedBy[SeverityCritical]) + ": the task fails"}
	case len(failedBy[SeverityError]) > 0:
		return Decision{AllowWithWarning, reason("error", failedBy[SeverityError]) + ": the run is flagged"}
	}
	if minor := append(failedBy[SeverityWarning], failedBy[SeverityInfo]...); len(minor) > 0 {
		return Decision{Allow, reason("warning or info", minor) + ": allowed"}
	}
	if run == 0 {
		return Decision{Allow, "no checks ran"}
	}
	return Decision{Allow, fmt.Sprintf("all %d check(s) passed", run)}
}

// reason names the failed checks of a severity.
func reason(severity string, names []string) string {
	return fmt.Sprintf("%s check(s) failed: %s", severity, strings.Join(names, ", "))
}
