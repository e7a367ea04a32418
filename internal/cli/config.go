package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// maxConfigBytes bounds the config file.
const maxConfigBytes = 1 << 20

// Config is the client configuration file: named profiles and the current one.
type Config struct {
	// Current names the profile used when none is given.
	Current string `yaml:"current"`
	// Profiles maps a name to a server and token.
	Profiles map[string]Profile `yaml:"profiles"`
}

// Profile is one server and the token to use with it; a profile signed in with OIDC also keeps
// what refreshes its token.
type Profile struct {
	Server       string    `yaml:"server"`                   // the server URL
	Token        string    `yaml:"token"`                    // the bearer token
	Issuer       string    `yaml:"oidc_issuer,omitempty"`    // the OIDC issuer signed in with
	ClientID     string    `yaml:"oidc_client_id,omitempty"` // the OAuth client of the sign-in
	TokenURL     string    `yaml:"oidc_token_url,omitempty"` // the issuer's token endpoint
	RefreshToken string    `yaml:"oidc_refresh_token,omitempty"`
	Expiry       time.Time `yaml:"oidc_expiry,omitempty"` // when Token expires (zero: unknown)
}

// ConfigPath is the config file: $LARK_CONFIG, else $XDG_CONFIG_HOME/lark/config.yaml, else
// ~/.config/lark/config.yaml.
func ConfigPath() (string, error) {
	if p := os.Getenv("LARK_CONFIG"); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "lark", "config.yaml"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no config directory: set LARK_CONFIG or XDG_CONFIG_HOME: %w", err)
	}
	return filepath.Join(home, ".config", "lark", "config.yaml"), nil
}

// loadConfig reads the config file; a missing file is an empty config.
func loadConfig() (Config, string, error) {
	cfg := Config{Profiles: map[string]Profile{}}
	path, err := ConfigPath()
	if err != nil {
		return cfg, "", err
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, path, nil
	}
	if err != nil {
		return cfg, path, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return cfg, path, err
	}
	if st.Size() > maxConfigBytes {
		return cfg, path, fmt.Errorf("%s is larger than %d bytes", path, maxConfigBytes)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return cfg, path, err
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return cfg, path, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.Profiles == nil {
		cfg.Profiles = map[string]Profile{}
	}
	return cfg, path, nil
}

// saveConfig writes the config atomically with mode 0600 (it holds tokens).
func saveConfig(path string, cfg Config) error {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func loginCmd(g *globals) *cobra.Command {
	var o oidcLogin
	c := &cobra.Command{Use: "login --server URL (--token TOKEN | --oidc ISSUER) [--profile NAME]",
		Short: "Save a server and token in a config profile and make it the current one",
		Long: `Save a server and token in the config file ($LARK_CONFIG, else $XDG_CONFIG_HOME/lark/config.yaml,
else ~/.config/lark/config.yaml; mode 0600) under a profile (default "default") and make it the
current profile. The token is checked against the server first. Without --server and --token it
lists the profiles.

With --oidc ISSUER it signs in with the issuer's device authorization grant instead: it prints a
code to enter at the issuer's verification page, waits for the approval, and saves the ID token
(else the access token) with its refresh token; later commands refresh it when it has expired or
is about to.`,
		Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if o.issuer != "" {
				if g.token != "" {
					return usageErr("lark login takes --token or --oidc, not both")
				}
				server := g.server
				if server == "" {
					server = envServerURL()
				}
				return g.loginOIDC(ctxOf(c), o, server, profileName(g.profile))
			}
			cfg, path, err := loadConfig()
			if err != nil {
				return usageErr("%v", err)
			}
			if g.server == "" && g.token == "" {
				names := make([]string, 0, len(cfg.Profiles))
				for n := range cfg.Profiles {
					names = append(names, n)
				}
				sort.Strings(names)
				t := newTable(g.out, "CURRENT", "PROFILE", "SERVER")
				for _, n := range names {
					cur := ""
					if n == cfg.Current {
						cur = "*"
					}
					t.row(cur, n, cfg.Profiles[n].Server)
				}
				return t.flush()
			}
			if g.server == "" || g.token == "" {
				return usageErr("lark login needs both --server and --token")
			}
			name := profileName(g.profile)
			cl, err := g.client()
			if err != nil {
				return err
			}
			// One cheap authenticated read proves the server and the token.
			if _, err := cl.ListEntrypoints(ctxOf(c), larkclientLimit1, false); err != nil {
				return fmt.Errorf("checking the token against %s: %w", g.server, err)
			}
			cfg.Profiles[name] = Profile{Server: g.server, Token: g.token}
			cfg.Current = name
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "Logged in to %s as profile %q (saved in %s).\n", g.server, name, path)
			return nil
		}}
	c.Flags().StringVar(&o.issuer, "oidc", "", "sign in with this OIDC issuer's device authorization grant")
	c.Flags().StringVar(&o.clientID, "client-id", "lark", "OAuth client ID registered at the issuer (with --oidc)")
	c.Flags().StringSliceVar(&o.scopes, "scopes", []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess},
		"scopes to ask for (with --oidc; offline_access gets a refresh token)")
	return c
}

// profileName is the profile login writes: --profile, else "default".
func profileName(flag string) string {
	if flag == "" {
		return "default"
	}
	return flag
}
