package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/server"
)

// parsed binds the serve flags to a fresh command and parses args.
func parsed(t *testing.T, args ...string) (*flags, *cobra.Command) {
	t.Helper()
	var f flags
	c := &cobra.Command{Use: "serve"}
	f.bind(c)
	require.NoError(t, c.Flags().Parse(args))
	return &f, c
}

func TestHTTPLimitFlags(t *testing.T) {
	f, c := parsed(t)
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.Equal(t, server.DefaultDrainTimeout, cfg.DrainTimeout)
	require.Equal(t, 30*time.Second, cfg.ReadTimeout)
	require.Equal(t, 60*time.Second, cfg.WriteTimeout)
	require.Equal(t, 64, cfg.MaxInFlight)

	f, c = parsed(t, "--drain-timeout=2m", "--read-timeout=5s", "--write-timeout=10s", "--idle-timeout=1m",
		"--read-header-timeout=2s", "--max-header-bytes=8192", "--max-in-flight=8")
	require.NoError(t, f.check(c))
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, cfg.DrainTimeout)
	require.Equal(t, 5*time.Second, cfg.ReadTimeout)
	require.Equal(t, 10*time.Second, cfg.WriteTimeout)
	require.Equal(t, time.Minute, cfg.IdleTimeout)
	require.Equal(t, 2*time.Second, cfg.ReadHeaderTimeout)
	require.Equal(t, 8192, cfg.MaxHeaderBytes)
	require.Equal(t, 8, cfg.MaxInFlight)

	for _, bad := range []string{"--drain-timeout=0s", "--read-timeout=-1s", "--max-in-flight=0", "--max-header-bytes=100"} {
		f, c = parsed(t, bad)
		require.Error(t, f.check(c), bad)
	}
}

func TestCPUSlotsFlag(t *testing.T) {
	f, c := parsed(t)
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.Zero(t, cfg.CPUSlots, "the default: the cores less one")

	for arg, want := range map[string]int{"--cpu-slots=-1": -1, "--cpu-slots=3": 3} {
		f, c = parsed(t, arg)
		require.NoError(t, f.check(c))
		cfg, err = f.config("", nil)
		require.NoError(t, err)
		require.Equal(t, want, cfg.CPUSlots, arg)
	}
	f, c = parsed(t, "--cpu-slots=-2")
	require.Error(t, f.check(c))

	t.Setenv("LARK_CPU_SLOTS", "2")
	f, c = parsed(t)
	require.NoError(t, f.check(c))
	require.Equal(t, 2, f.cpuSlots)
}

func TestSQLiteSynchronousFlag(t *testing.T) {
	f, c := parsed(t)
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.Equal(t, "FULL", cfg.SQLiteSynchronous, "the default")

	for arg, want := range map[string]string{"--sqlite-synchronous=normal": "NORMAL", "--sqlite-synchronous=NORMAL": "NORMAL",
		"--sqlite-synchronous=Full": "FULL"} {
		f, c = parsed(t, arg)
		require.NoError(t, f.check(c), arg)
		cfg, err = f.config("", nil)
		require.NoError(t, err)
		require.Equal(t, want, cfg.SQLiteSynchronous, arg)
	}
	for _, bad := range []string{"--sqlite-synchronous=off", "--sqlite-synchronous=extra", "--sqlite-synchronous="} {
		f, c = parsed(t, bad)
		require.ErrorContains(t, f.check(c), "--sqlite-synchronous must be full or normal", bad)
	}

	t.Setenv("LARK_SQLITE_SYNCHRONOUS", "normal")
	f, c = parsed(t)
	require.NoError(t, f.check(c))
	require.Equal(t, "NORMAL", f.sqliteSynchronous)
	f, c = parsed(t, "--sqlite-synchronous=full")
	require.NoError(t, f.check(c))
	require.Equal(t, "FULL", f.sqliteSynchronous, "the flag wins over the environment")
}

func TestCPUNiceFlag(t *testing.T) {
	f, c := parsed(t)
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.Equal(t, 19, cfg.CPUNice, "the default: the lowest priority")

	f, c = parsed(t, "--cpu-nice=0")
	require.NoError(t, f.check(c))
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.Zero(t, cfg.CPUNice, "0 keeps the server's priority")

	for _, bad := range []string{"--cpu-nice=-1", "--cpu-nice=20"} {
		f, c = parsed(t, bad)
		require.Error(t, f.check(c), bad)
	}
	t.Setenv("LARK_CPU_NICE", "10")
	f, c = parsed(t)
	require.NoError(t, f.check(c))
	require.Equal(t, 10, f.cpuNice)
}

func TestNATSFlag(t *testing.T) {
	f, c := parsed(t)
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.Empty(t, cfg.NATS.URL, "the bridge is off by default")

	f, c = parsed(t, "--nats=nats://127.0.0.1:4222")
	require.NoError(t, f.check(c))
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.Equal(t, "nats://127.0.0.1:4222", cfg.NATS.URL)

	for _, ok := range []string{"nats://a:4222,nats://b:4222", "tls://nats.example.com:4222", "wss://nats.example.com"} {
		f, c = parsed(t, "--nats="+ok)
		require.NoError(t, f.check(c), ok)
	}
	for _, bad := range []string{"127.0.0.1:4222", "http://127.0.0.1:4222", "nats://", "nats://a:4222,", "nats://a b"} {
		f, c = parsed(t, "--nats="+bad)
		require.ErrorContains(t, f.check(c), "--nats", bad)
	}

	t.Setenv("LARK_NATS_URL", "nats://10.0.0.1:4222")
	f, c = parsed(t)
	require.NoError(t, f.check(c))
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.Equal(t, "nats://10.0.0.1:4222", cfg.NATS.URL)
}

func TestMasterKeyFlag(t *testing.T) {
	t.Setenv("LARK_MASTER_KEY", "")
	f, c := parsed(t)
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.Nil(t, cfg.Keyring, "no key: secrets disabled")

	key, err := keyring.Generate()
	require.NoError(t, err)
	t.Setenv("LARK_MASTER_KEY", key)
	f, c = parsed(t)
	require.NoError(t, f.check(c))
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.NotNil(t, cfg.Keyring)

	file := filepath.Join(t.TempDir(), "master.key")
	require.NoError(t, os.WriteFile(file, []byte(key), 0o600))
	f, c = parsed(t, "--master-key-file="+file)
	require.NoError(t, f.check(c))
	_, err = f.config("", nil)
	require.ErrorContains(t, err, "use one", "the env and the flag together are ambiguous")

	t.Setenv("LARK_MASTER_KEY", "")
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.NotNil(t, cfg.Keyring)

	t.Setenv("LARK_MASTER_KEY", "not-a-key")
	f, c = parsed(t)
	require.NoError(t, f.check(c))
	_, err = f.config("", nil)
	require.ErrorContains(t, err, "LARK_MASTER_KEY")
}

func TestTrustedProxiesFlag(t *testing.T) {
	f, c := parsed(t)
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.Empty(t, cfg.TrustedProxies, "by default the TCP peer is the sender")

	f, c = parsed(t, "--trusted-proxies=10.0.0.0/8, 192.168.1.7,::1")
	require.NoError(t, f.check(c))
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("::1/128")},
		cfg.TrustedProxies)

	f, c = parsed(t, "--trusted-proxies=10.0.0.0/8,proxy.local")
	require.NoError(t, f.check(c))
	_, err = f.config("", nil)
	require.ErrorContains(t, err, "--trusted-proxies")
}

func TestIdentityProvidersFlag(t *testing.T) {
	f, c := parsed(t, "--identity-providers=/etc/lark/idp.json")
	require.NoError(t, f.check(c))
	cfg, err := f.config("", nil)
	require.NoError(t, err)
	require.Equal(t, "/etc/lark/idp.json", cfg.IdentityProvidersFile)
}
