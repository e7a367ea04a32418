package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

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

// Profile is one server and the token to use with it.
type Profile struct {
	Server string `yaml:"server"` // the server URL
	Token  string `yaml:"token"`  // the bearer token
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
	c := &cobra.Command{Use: "login --server URL --token TOKEN [--profile NAME]",
		Short: "Save a server and token in a config profile and make it the current one",
		Long: `Save a server and token in the config file ($LARK_CONFIG, else $XDG_CONFIG_HOME/lark/config.yaml,
else ~/.config/lark/config.yaml; mode 0600) under a profile (default "default") and make it the
current profile. The token is checked against the server first. Without --server and --token it
lists the profiles.`,
		Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
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
			name := g.profile
			if name == "" {
				name = "default"
			}
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
	return c
}
