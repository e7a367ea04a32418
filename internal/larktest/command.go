package larktest

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Command is `lark test DIR`. Its flags are go test's: -v, -run REGEX, -timeout D (the
// double-dash forms work too).
func Command() *cobra.Command {
	c := &cobra.Command{
		Use:   "test DIR [-v] [-run REGEX] [-timeout D]",
		Short: "Run the *_test.star tests of a folder against an in-process runtime (stubbed HTTP, fake clock)",
		Long: "lark test finds the *_test.star files under DIR and runs each test_* function against a fresh in-process\n" +
			"Lark holding the entrypoints, schedules, triggers and webhook triggers of the test file's folder.\n\n" +
			"  -v           list every test\n" +
			"  -run REGEX   run only the tests whose name matches\n" +
			"  -timeout D   longest one test may run (default 1m)\n\n" +
			"Exit code 0: all passed; 1: a test failed; 2: the tests or manifests could not be loaded.\n" +
			"See docs/testing.md.",
		// go test's single-dash long flags (-run, -timeout) are not pflag's: the command parses its
		// own arguments.
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			o, help, err := parseArgs(args)
			if err != nil {
				return &UsageError{err}
			}
			if help {
				return c.Help()
			}
			o.Out = c.OutOrStdout()
			_, err = Run(c.Context(), o)
			return err
		},
	}
	return c
}

// parseArgs reads `lark test`'s arguments: one folder and the flags, in go test's spelling or
// with two dashes.
func parseArgs(args []string) (Options, bool, error) {
	var o Options
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(nil)
	fs.Usage = func() {}
	run := fs.String("run", "", "")
	fs.BoolVarP(&o.Verbose, "verbose", "v", false, "")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "")
	help := fs.BoolP("help", "h", false, "")
	norm := make([]string, 0, len(args))
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && (name == "run" || name == "timeout" || name == "help") {
			a = "-" + a
		}
		norm = append(norm, a)
	}
	if err := fs.Parse(norm); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, true, nil
		}
		return o, false, err
	}
	if *help {
		return o, true, nil
	}
	if fs.NArg() != 1 {
		return o, false, fmt.Errorf("lark test takes one folder, got %d arguments", fs.NArg())
	}
	o.Dir = fs.Arg(0)
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			return o, false, fmt.Errorf("-run: %w", err)
		}
		o.Run = re
	}
	if o.Timeout <= 0 {
		return o, false, fmt.Errorf("-timeout must be positive, got %v", o.Timeout)
	}
	return o, false, nil
}
