package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/tokens"
)

// DevCredentials are what `lark dev` prints and keeps in <data>/dev-credentials.json (mode 0600),
// so that restarting the dev server keeps the same tokens.
type DevCredentials struct {
	TenantID   string `json:"tenant_id"`
	AdminToken string `json:"admin_token"`
	Token      string `json:"token"`
}

// DevTenant is the tenant `lark dev` provisions.
const DevTenant = "dev"

// LoadOrCreateDevAdmin returns the operator token for dev mode: from the file if present, else new.
func LoadOrCreateDevAdmin(dataDir string) (DevCredentials, error) {
	var c DevCredentials
	b, err := os.ReadFile(filepath.Join(dataDir, "dev-credentials.json"))
	if err == nil {
		if err := json.Unmarshal(b, &c); err != nil {
			return c, fmt.Errorf("dev credentials: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return c, err
	}
	if c.AdminToken == "" {
		if c.AdminToken, _, err = auth.NewSecret(); err != nil {
			return c, err
		}
	}
	c.TenantID = DevTenant
	return c, nil
}

// ProvisionDev enables the dev tenant and makes sure c.Token is a live admin token of it, issuing a
// new one when needed. It saves c (atomically, mode 0600) when c differs from what is on disk.
func (s *Server) ProvisionDev(ctx context.Context, c *DevCredentials) error {
	op := auth.SecurityContext{SubjectID: tokens.OperatorSubject, Operator: true}
	if err := s.Tenants.RequireEnabled(ctx, c.TenantID); err != nil {
		// The dev tenant may call any public host (private and loopback addresses stay blocked).
		if _, err := s.Tenants.Enable(ctx, op, c.TenantID, []byte(`{"governance":{"allowed_outbound_domains":["*"]}}`)); err != nil {
			return fmt.Errorf("enable dev tenant: %w", err)
		}
	}
	valid := false
	if c.Token != "" {
		if sc, err := s.Tokens.Authenticate(ctx, c.Token); err == nil && sc.TenantID == c.TenantID {
			valid = true
		}
	}
	if !valid {
		tk, err := s.Tokens.CreateToken(ctx, op, tokens.CreateTokenRequest{TenantID: c.TenantID, SubjectID: "dev",
			Roles: []auth.Role{auth.RoleAdmin}, Description: "lark dev"})
		if err != nil {
			return fmt.Errorf("dev token: %w", err)
		}
		c.Token = tk.Secret
	}
	return SaveDevCredentials(s.cfg.DataDir, *c)
}

// SaveDevCredentials writes c to <dataDir>/dev-credentials.json if it changed: a temporary file,
// fsync, rename, so a crash never leaves a truncated file; the mode is always 0600.
func SaveDevCredentials(dataDir string, c DevCredentials) error {
	path := filepath.Join(dataDir, "dev-credentials.json")
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return os.Chmod(path, 0o600)
	}
	f, err := os.CreateTemp(dataDir, ".dev-credentials-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
