package larktest

import (
	"fmt"
	"regexp"
	"time"

	"github.com/spf13/cobra"
)

// Command is `lark test DIR`.
func Command() *cobra.Command {
	var run string
	var verbose bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "test DIR",
		Short: "Run the *_test.star tests of a folder against an in-process runtime (stubbed HTTP, fake clock)",
		Long: "lark test finds the *_test.star files under DIR and runs each test_* function against a fresh in-process\n" +
			"Lark holding the entrypoints, schedules, triggers and webhook triggers of the test file's folder.\n" +
			"Exit code 0: all passed; 1: a test failed; 2: the tests or manifests could not be loaded.\n" +
			"See docs/testing.md.",
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &UsageError{fmt.Errorf("lark test takes one folder, got %d arguments", len(args))}
			}
			o := Options{Dir: args[0], Verbose: verbose, Timeout: timeout, Out: c.OutOrStdout()}
			if run != "" {
				re, err := regexp.Compile(run)
				if err != nil {
					return &UsageError{fmt.Errorf("-run: %w", err)}
				}
				o.Run = re
			}
			_, err := Run(c.Context(), o)
			return err
		},
	}
	c.Flags().StringVar(&run, "run", "", "run only the tests whose name matches this regular expression")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every test")
	c.Flags().DurationVar(&timeout, "timeout", DefaultTimeout, "longest one test may run")
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{err} })
	return c
}
