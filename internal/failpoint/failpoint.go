// Package failpoint kills the process at named points of the engine when the LARK_FAILPOINT
// environment variable names them (a comma-separated list): the crash tests' kill -9 at an exact
// step (e2e/dag_crash_test.go). With the variable unset, as in production, Hit is a lookup in an
// empty map.
package failpoint

import (
	"os"
	"strings"
)

// armed are the points LARK_FAILPOINT names, read once at start.
var armed = parse(os.Getenv("LARK_FAILPOINT"))

func parse(v string) map[string]bool {
	m := map[string]bool{}
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			m[name] = true
		}
	}
	return m
}

// Hit kills the process at once (SIGKILL where there are signals: nothing is flushed, no deferred
// function runs) when name is armed.
func Hit(name string) {
	if !armed[name] {
		return
	}
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		_ = p.Kill()
	}
	select {} // the kill is on its way
}
