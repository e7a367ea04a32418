// Package cli holds the client commands of the lark binary: login, deploy, validate, invoke,
// invocations, schedules, backfill, events, event-types, triggers, dead-letters, webhooks,
// secrets, tokens, audit, workers, tail, dag and assets. They talk to a Lark
// server through pkg/larkclient; cmd/lark only adds them to its root command (docs/cli.md).
//
// Exit codes: 0 success; 1 the operation failed (an invocation failed, validation problems);
// 2 a usage error (bad flags, arguments or manifests that cannot be read); 3 an API or network
// error (the server refused the request or could not be reached); 4, 5 and 6 an invocation that
// ended canceled, compensated or dead-lettered.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/pkg/larkclient"
)

// Exit codes of the client commands.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
	ExitAPI    = 3
	// ExitCanceled, ExitCompensated and ExitDeadLettered are an invocation's other unsuccessful
	// ends (a failed one is ExitFailed).
	ExitCanceled     = 4
	ExitCompensated  = 5
	ExitDeadLettered = 6
)

// statusExit is the exit code of an invocation that ended with status: 0 when it succeeded.
func statusExit(status string) int {
	switch status {
	case "succeeded":
		return ExitOK
	case "canceled":
		return ExitCanceled
	case "compensated":
		return ExitCompensated
	case "dead_lettered":
		return ExitDeadLettered
	}
	return ExitFailed
}

// exitError carries an exit code with its error.
type exitError struct {
	code int
	err  error
}

// Error is the wrapped error's message.
func (e *exitError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *exitError) Unwrap() error { return e.err }

// usageErr is an error that exits with ExitUsage.
func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// failed is an error that exits with ExitFailed (the operation ran and failed).
func failed(format string, args ...any) error {
	return &exitError{code: ExitFailed, err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error returned by a command to the process exit code: 0 for nil, the code an
// error carries, 3 for API problems and network errors, 2 for cobra's usage errors, else 1.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ec interface{ ExitCode() int } // lark test's: 1 a test failed, 2 a usage or load error
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	var p *larkclient.Problem
	if errors.As(err, &p) {
		return ExitAPI
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) {
		return ExitAPI
	}
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "required flag"} {
		if strings.HasPrefix(msg, prefix) {
			return ExitUsage
		}
	}
	return ExitFailed
}

// globals are the connection and output flags every client command takes.
type globals struct {
	server, token, profile, output string
	// out and errOut are where commands print (cobra's writers, so tests can capture them).
	out, errOut io.Writer
	// now is the clock (tests pin it).
	now func() time.Time
	// poll is the polling interval of --follow, --watch and tail.
	poll time.Duration
	// httpClient talks to OIDC issuers (nil: http.DefaultClient; tests trust their issuer's
	// certificate with it).
	httpClient *http.Client
}

// Commands returns the client commands, to be added to the lark root command.
func Commands() []*cobra.Command {
	return commands(&globals{now: time.Now, poll: 500 * time.Millisecond})
}

// commands builds the client commands around g (tests set its clock and polling interval).
func commands(g *globals) []*cobra.Command {
	cmds := []*cobra.Command{
		loginCmd(g), deployCmd(g), validateCmd(g), invokeCmd(g), entrypointsCmd(g), invocationsCmd(g), schedulesCmd(g),
		backfillCmd(g), eventsCmd(g), triggersCmd(g), tailCmd(g), dagCmd(g), assetsCmd(g),
		eventTypesCmd(g), deadLettersCmd(g), webhooksCmd(g), secretsCmd(g), tokensCmd(g), auditCmd(g),
		workersCmd(g),
	}
	for _, c := range cmds {
		pf := c.PersistentFlags()
		pf.StringVar(&g.server, "server", "", "server URL (env LARK_SERVER or LARK_URL; default: the profile's)")
		pf.StringVar(&g.token, "token", "", "bearer token (env LARK_TOKEN; default: the profile's)")
		pf.StringVar(&g.profile, "profile", "", "config profile (env LARK_PROFILE; default: the current one)")
		pf.StringVarP(&g.output, "output", "o", "table", "output: table or json")
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
		hookPreRun(c, g)
		groupsAndCompletion(c, g)
	}
	return cmds
}

// hookPreRun makes every command under c set the writers and check -o before running.
func hookPreRun(c *cobra.Command, g *globals) {
	c.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		g.out, g.errOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
		if g.output != "table" && g.output != "json" {
			return usageErr("-o must be table or json, got %q", g.output)
		}
		return nil
	}
}

// args checks the number of positional arguments, as a usage error.
func args(min, max int) cobra.PositionalArgs {
	return func(c *cobra.Command, a []string) error {
		if len(a) < min || (max >= 0 && len(a) > max) {
			return usageErr("%s: wrong number of arguments (usage: %s)", c.CommandPath(), c.UseLine())
		}
		return nil
	}
}

// client builds the API client from the flags, the environment and the config file.
func (g *globals) client() (*larkclient.Client, error) {
	server, token, err := g.credentials()
	if err != nil {
		return nil, err
	}
	c, err := larkclient.New(server, token, larkclient.WithUserAgent("lark-cli"))
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return c, nil
}

// credentials resolves the server and token, each from the first place that has it: the
// --server/--token flags; the profile named by --profile; LARK_SERVER (or LARK_URL) and
// LARK_TOKEN (else LARK_OIDC_TOKEN); the profile named by LARK_PROFILE, else the config file's
// current profile. A profile's OIDC token that has expired, or is about to, is refreshed first.
func (g *globals) credentials() (server, token string, err error) {
	server, token = g.server, g.token
	if server != "" && token != "" {
		return server, token, nil
	}
	cfg, path, err := loadConfig()
	if err != nil {
		return "", "", usageErr("%v", err)
	}
	fill := func(s, t string) {
		if server == "" {
			server = s
		}
		if token == "" {
			token = t
		}
	}
	// fromProfile fills from a profile, refreshing its OIDC token first when it is the one used.
	fromProfile := func(name string, p Profile) error {
		if token == "" {
			if p, err = g.refreshDue(cfg, path, name, p); err != nil {
				return err
			}
		}
		fill(p.Server, p.Token)
		return nil
	}
	if g.profile != "" {
		p, ok := cfg.Profiles[g.profile]
		if !ok {
			return "", "", usageErr("no profile %q in %s (lark login --profile %s)", g.profile, path, g.profile)
		}
		if err := fromProfile(g.profile, p); err != nil {
			return "", "", err
		}
	}
	fill(envServerURL(), envToken())
	name := os.Getenv("LARK_PROFILE")
	if name == "" {
		name = cfg.Current
	}
	if p, ok := cfg.Profiles[name]; ok {
		if err := fromProfile(name, p); err != nil {
			return "", "", err
		}
	}
	if server == "" || token == "" {
		return "", "", usageErr("no server or token: run `lark login --server URL --token TOKEN`, or set LARK_SERVER and LARK_TOKEN (or LARK_OIDC_TOKEN)")
	}
	return server, token, nil
}

// envServerURL is LARK_SERVER, else LARK_URL.
func envServerURL() string {
	if s := os.Getenv("LARK_SERVER"); s != "" {
		return s
	}
	return os.Getenv("LARK_URL")
}

// envToken is LARK_TOKEN, else LARK_OIDC_TOKEN (an OIDC token from CI, used as the bearer as-is).
func envToken() string {
	if t := os.Getenv("LARK_TOKEN"); t != "" {
		return t
	}
	return os.Getenv("LARK_OIDC_TOKEN")
}

// ctx returns the command's context (never nil).
func ctxOf(c *cobra.Command) context.Context {
	if ctx := c.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
