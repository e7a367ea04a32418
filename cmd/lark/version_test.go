package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: lark version and lark --version print the version, commit and build date.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		cmd := root()
		cmd.SetOut(&out)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		got := out.String()
		for _, want := range []string{"lark ", "commit ", "built ", runtime.Version()} {
			if !strings.Contains(got, want) {
				t.Errorf("%v printed %q, want it to contain %q", args, got, want)
			}
		}
	}
}
