package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/pkg/larkclient"
)

func secretsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "secrets", Aliases: []string{"secret"}, Short: "List, set and delete the tenant's secrets (never their values)"}
	var lf listFlags
	list := &cobra.Command{Use: "list", Short: "List the secrets' names and metadata", Args: args(0, 0),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, _ []string) error {
			return printList(g, cl.AllSecrets(ctx, lf.opts()), lf.limit, func(s larkclient.Secret) json.RawMessage { return s.JSON },
				[]string{"NAME", "VERSION", "ALLOWED HOSTS", "UPDATED", "LAST USED", "DESCRIPTION"},
				func(s larkclient.Secret) []string {
					return []string{s.Name, fmt.Sprint(s.Version), strings.Join(s.AllowedHosts, ","), ts(s.UpdatedAt), tsp(s.LastUsedAt), s.Description}
				})
		})}
	lf.add(list, 0)
	get := g.idCmd("get NAME", "Show a secret's metadata and versions", func(ctx context.Context, cl *larkclient.Client, name string) error {
		s, err := cl.GetSecret(ctx, name)
		if err != nil {
			return err
		}
		return printJSON(g.out, s.JSON)
	})
	del := g.idCmd("delete NAME", "Delete a secret and its versions", func(ctx context.Context, cl *larkclient.Client, name string) error {
		if err := cl.DeleteSecret(ctx, name); err != nil {
			return err
		}
		fmt.Fprintf(g.out, "deleted secret %s\n", name)
		return nil
	})
	c.AddCommand(list, get, setSecretCmd(g), del)
	return c
}

// setSecretCmd creates a secret, or gives an existing one a new value (a new version) or new
// metadata. The value is read from a file or stdin, never from an argument (shell history).
func setSecretCmd(g *globals) *cobra.Command {
	var file, description, hosts string
	var noValue bool
	c := &cobra.Command{Use: "set NAME [--from-file F] [--allowed-hosts H1,H2] [--description D]",
		Short: "Create a secret or set its value (from stdin or --from-file) and metadata",
		Long: `Create the secret NAME, or update it: the value is read from --from-file, else from stdin (one
trailing newline is dropped), never from the command line. --allowed-hosts is required to create
one. --no-value changes only the description or the allowed hosts. The value is never printed.`,
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			in := larkclient.SecretInput{Name: a[0]}
			if hosts != "" {
				in.AllowedHosts = strings.Split(hosts, ",")
			}
			if c.Flags().Changed("description") {
				in.Description = &description
			}
			if !noValue {
				v, err := readSecretValue(file, c.InOrStdin())
				if err != nil {
					return err
				}
				in.Value = v
			} else if in.AllowedHosts == nil && in.Description == nil {
				return usageErr("--no-value needs --allowed-hosts or --description")
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			return g.setSecret(ctxOf(c), cl, in)
		}}
	c.Flags().StringVar(&file, "from-file", "", "read the value from this file (default: stdin)")
	c.Flags().StringVar(&hosts, "allowed-hosts", "", "comma-separated hosts the value may be sent to (required to create)")
	c.Flags().StringVar(&description, "description", "", "the description")
	c.Flags().BoolVar(&noValue, "no-value", false, "keep the value; change only the metadata")
	return c
}

// setSecret creates the secret when it does not exist, else updates it.
func (g *globals) setSecret(ctx context.Context, cl *larkclient.Client, in larkclient.SecretInput) error {
	_, err := cl.GetSecret(ctx, in.Name)
	var p *larkclient.Problem
	switch {
	case errors.As(err, &p) && p.NotFound():
		if in.Value == "" {
			return usageErr("secret %s does not exist: give its value to create it", in.Name)
		}
		if len(in.AllowedHosts) == 0 {
			return usageErr("--allowed-hosts is required to create secret %s", in.Name)
		}
		s, err := cl.CreateSecret(ctx, in)
		if err != nil {
			return err
		}
		return g.done(s.JSON, "created secret %s (version %d)", s.Name, s.Version)
	case err != nil:
		return err
	}
	s, err := cl.UpdateSecret(ctx, in.Name, in)
	if err != nil {
		return err
	}
	return g.done(s.JSON, "updated secret %s (version %d)", s.Name, s.Version)
}

// readSecretValue reads a secret's value from file, else stdin (64 KiB at most), without one
// trailing newline.
func readSecretValue(file string, stdin io.Reader) (string, error) {
	r := stdin
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return "", usageErr("%v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, 64<<10+2))
	if err != nil {
		return "", usageErr("reading the value: %v", err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", usageErr("no value: pipe it on stdin or give --from-file (or --no-value)")
	}
	return v, nil
}

func tokensCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "tokens", Aliases: []string{"token"}, Short: "Issue, list and revoke API tokens (admin)"}
	var lf listFlags
	list := &cobra.Command{Use: "list", Short: "List tokens, revoked and expired ones included (never their secrets)", Args: args(0, 0),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, _ []string) error {
			return printList(g, cl.AllTokens(ctx, lf.opts()), lf.limit, func(t larkclient.Token) json.RawMessage { return t.JSON },
				[]string{"TOKEN", "SUBJECT", "ROLES", "CREATED", "EXPIRES", "REVOKED", "DESCRIPTION"},
				func(t larkclient.Token) []string {
					return []string{t.ID, t.SubjectID, strings.Join(t.Roles, ","), ts(t.CreatedAt), tsp(t.ExpiresAt), tsp(t.RevokedAt), t.Description}
				})
		})}
	lf.add(list, 0)
	revoke := g.idCmd("revoke ID", "Revoke a token (its next use is refused)", func(ctx context.Context, cl *larkclient.Client, id string) error {
		if err := cl.RevokeToken(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(g.out, "revoked token %s\n", id)
		return nil
	})
	c.AddCommand(list, createTokenCmd(g), revoke)
	return c
}

func workersCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "workers", Short: "List the remote workers the nodes have seen (operator)"}
	var lf listFlags
	list := &cobra.Command{Use: "list", Short: "List the remote workers: node, status (online: seen in the last 30 s), tasks held, key, tenants",
		Long: "List the remote workers the nodes have seen, one row per worker and node. A tenant's operator sees the workers its " +
			"tasks may go to; the platform operator every one. Filter with --filter \"status eq 'online'\" or on worker_id, node, " +
			"key_id, first_seen_at, last_seen_at.",
		Args: args(0, 0),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, _ []string) error {
			return printList(g, cl.AllWorkers(ctx, lf.opts()), lf.limit, func(w larkclient.Worker) json.RawMessage { return w.JSON },
				[]string{"WORKER", "NODE", "STATUS", "TASKS", "CAPACITY", "KEY", "TENANTS", "FIRST SEEN", "LAST SEEN", "VERSION"},
				func(w larkclient.Worker) []string {
					capacity, tenants, version := "-", "all", w.Version
					if w.Capacity > 0 {
						capacity = strconv.Itoa(w.Capacity)
					}
					if len(w.Tenants) > 0 {
						tenants = strings.Join(w.Tenants, ",")
					}
					if version == "" {
						version = "-"
					}
					return []string{w.WorkerID, w.Node, w.Status, strconv.Itoa(w.TasksHeld), capacity, w.KeyID, tenants,
						ts(w.FirstSeenAt), ts(w.LastSeenAt), version}
				})
		})}
	lf.add(list, 0)
	c.AddCommand(list)
	return c
}

func createTokenCmd(g *globals) *cobra.Command {
	var in larkclient.CreateTokenInput
	var roles, expires string
	c := &cobra.Command{Use: "create --subject S --roles R1,R2 [--description D] [--expires 720h|RFC3339]",
		Short: "Issue a token; its secret is printed this once (stdout), its id on stderr", Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if in.SubjectID == "" || roles == "" {
				return usageErr("--subject and --roles are required")
			}
			in.Roles = strings.Split(roles, ",")
			if expires != "" {
				at, err := expiry(expires, g.now())
				if err != nil {
					return err
				}
				in.ExpiresAt = &at
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			t, err := cl.CreateToken(ctxOf(c), in)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, t.JSON)
			}
			fmt.Fprintf(g.errOut, "created token %s for %s (%s); the secret below is shown only this once\n", t.ID, t.SubjectID, strings.Join(t.Roles, ","))
			fmt.Fprintln(g.out, t.Secret)
			return nil
		}}
	c.Flags().StringVar(&in.SubjectID, "subject", "", "who the token is (subject_id)")
	c.Flags().StringVar(&roles, "roles", "", "comma-separated: viewer, operator, developer, admin")
	c.Flags().StringVar(&in.Description, "description", "", "free text")
	c.Flags().StringVar(&in.TenantID, "tenant", "", "the tenant (platform operator only)")
	c.Flags().StringVar(&expires, "expires", "", "when it expires: RFC 3339, or a duration from now (720h)")
	return c
}

// expiry reads an RFC 3339 time or a duration from now.
func expiry(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usageErr("--expires %q: want RFC 3339 or a duration such as 720h", s)
	}
	return t, nil
}
