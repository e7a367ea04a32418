package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/secrets"
	"github.com/larkrun/lark/internal/server"
)

func TestLoadMasterKey(t *testing.T) {
	t.Parallel()
	k1, err := keyring.Generate()
	require.NoError(t, err)
	k2, err := keyring.Generate()
	require.NoError(t, err)

	kr, err := server.LoadMasterKey("", "")
	require.NoError(t, err)
	require.Nil(t, kr, "no key: secrets disabled")

	kr, err = server.LoadMasterKey(k1+","+k2, "")
	require.NoError(t, err)
	require.Len(t, kr.KeyIDs(), 2)

	file := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(file, []byte(k2+"\n"), 0o600))
	kr, err = server.LoadMasterKey("", file)
	require.NoError(t, err)
	require.Len(t, kr.KeyIDs(), 1)

	_, err = server.LoadMasterKey(k1, file)
	require.ErrorContains(t, err, "use one")

	bad := k1[:10] + "!!" + k1[12:]
	_, err = server.LoadMasterKey(bad, "")
	require.ErrorContains(t, err, "LARK_MASTER_KEY")
	require.NotContains(t, err.Error(), k1[12:], "errors never repeat key material")
	big := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("A"), 65<<10), 0o600))
	_, err = server.LoadMasterKey("", big)
	require.ErrorContains(t, err, "larger than")
}

func TestDevMasterKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, err := server.LoadOrCreateDevMasterKey(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, server.DevMasterKeyFile), path)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	first, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = server.LoadMasterKey("", path)
	require.NoError(t, err)
	// A second start keeps the key.
	_, err = server.LoadOrCreateDevMasterKey(dir)
	require.NoError(t, err)
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, first, again)
}

// TestRotationAtStart: a server started with "NEW,OLD" rewraps what was sealed under OLD before it
// serves, and logs the counts; after that NEW alone opens everything.
func TestRotationAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oldKey, err := keyring.Generate()
	require.NoError(t, err)
	newKey, err := keyring.Generate()
	require.NoError(t, err)
	start := func(setting string, log *bytes.Buffer) *server.Server {
		t.Helper()
		kr, err := server.LoadMasterKey(setting, "")
		require.NoError(t, err)
		lg := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
		if log != nil {
			lg = slog.New(slog.NewTextHandler(log, nil))
		}
		srv, err := server.New(context.Background(), server.Config{DataDir: dir, Keyring: kr, Logger: lg})
		require.NoError(t, err)
		return srv
	}
	admin := auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleAdmin}}
	srv := start(oldKey, nil)
	v := "value-under-old-key"
	_, err = srv.Secrets.Create(context.Background(), admin, secrets.Create{Name: "k", Value: &v, AllowedHosts: []string{"api.example.com"}})
	require.NoError(t, err)
	require.NoError(t, srv.Close())

	var log bytes.Buffer
	srv = start(newKey+","+oldKey, &log)
	require.Contains(t, log.String(), "rewrapped=1")
	require.NotContains(t, log.String(), v)
	require.NoError(t, srv.Close())

	srv = start(newKey, nil)
	got, err := srv.Secrets.ForTenant("acme", "").ResolveSecret(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, v, got.Value)
	require.NoError(t, srv.Close())
	require.False(t, strings.Contains(log.String(), oldKey) || strings.Contains(log.String(), newKey), "no key in the logs")
}

// TestWrongMasterKeyStopsTheStart: tenant secrets sealed under a key that is not configured stop
// the start, with an error naming the configured key's fingerprint and the way out (never a key or
// a value); with AllowUnreadableSecrets the server starts, logs it, and the secret stays
// unreadable. Webhook secrets follow the same rule (internal/api, TestWebhookWrongMasterKey).
func TestWrongMasterKeyStopsTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	right, err := keyring.Generate()
	require.NoError(t, err)
	wrong, err := keyring.Generate()
	require.NoError(t, err)
	start := func(setting string, allow bool, log *bytes.Buffer) (*server.Server, error) {
		kr, err := server.LoadMasterKey(setting, "")
		require.NoError(t, err)
		return server.New(context.Background(), server.Config{DataDir: dir, Keyring: kr, AllowUnreadableSecrets: allow,
			Logger: slog.New(slog.NewTextHandler(log, nil))})
	}
	var log bytes.Buffer
	srv, err := start(right, false, &log)
	require.NoError(t, err)
	admin := auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleAdmin}}
	v := "value-under-the-right-key"
	_, err = srv.Secrets.Create(context.Background(), admin, secrets.Create{Name: "k", Value: &v, AllowedHosts: []string{"api.example.com"}})
	require.NoError(t, err)
	require.NoError(t, srv.Close())

	wrongKR, err := keyring.Parse(wrong)
	require.NoError(t, err)
	_, err = start(wrong, false, &log)
	require.Error(t, err)
	require.Contains(t, err.Error(), "tenant secrets: 1 stored values cannot be opened")
	require.Contains(t, err.Error(), wrongKR.Current(), "the configured key's fingerprint")
	require.Contains(t, err.Error(), "--allow-unreadable-secrets")

	srv, err = start(wrong, true, &log)
	require.NoError(t, err)
	require.Contains(t, log.String(), "starting with unreadable secrets")
	_, err = srv.Secrets.ForTenant("acme", "").ResolveSecret(context.Background(), "k")
	require.Error(t, err, "still unreadable")
	require.NoError(t, srv.Close())

	// The right key opens it again: nothing was lost.
	srv, err = start(right, false, &log)
	require.NoError(t, err)
	got, err := srv.Secrets.ForTenant("acme", "").ResolveSecret(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, v, got.Value)
	require.NoError(t, srv.Close())
	require.False(t, strings.Contains(log.String(), right) || strings.Contains(log.String(), wrong) || strings.Contains(log.String(), v),
		"no key or value in the logs")
}
