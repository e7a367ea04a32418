package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version, commit and date may be set at link time (-ldflags "-X main.version=v1.2.3 …") by a
// release build; otherwise they come from the binary's build information: the module version
// `go install …@v1.2.3` records, and the VCS revision and time `go build` records in a checkout.
var version, commit, date string

// buildVersion is what `lark version` and `lark --version` print about this binary.
type buildVersion struct {
	Version, Commit, Date, Go string
	Modified                  bool
}

func readVersion() buildVersion {
	v := buildVersion{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.time":
				if v.Date == "" {
					v.Date = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	if v.Date == "" {
		v.Date = "unknown"
	}
	return v
}

func (v buildVersion) String() string {
	dirty := ""
	if v.Modified {
		dirty = " (modified)"
	}
	return fmt.Sprintf("lark %s (commit %s%s, built %s, %s)", v.Version, v.Commit, dirty, v.Date, v.Go)
}

// versionCmd is lark version.
func versionCmd() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "Print the version, commit and build date of this binary", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), readVersion())
			return err
		}}
}
