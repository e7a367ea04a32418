package pgstore

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestDialerSetsKeepaliveAndUserTimeout: a connection the store dials has keepalives on, with the
// idle time, interval and count Options.TCPTimeout is split into, and TCP_USER_TIMEOUT set to it.
func TestDialerSetsKeepaliveAndUserTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	cfg, err := pgxpool.ParseConfig("postgres://u@h/db")
	require.NoError(t, err)
	applyTimeouts(cfg, timeoutsOf(Options{TCPTimeout: 12 * time.Second}))
	c, err := cfg.ConnConfig.DialFunc(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	got := map[string]int{}
	require.NoError(t, raw.Control(func(fd uintptr) {
		for name, opt := range map[string][2]int{
			"keepalive": {unix.SOL_SOCKET, unix.SO_KEEPALIVE}, "idle": {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			"interval": {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL}, "count": {unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
			"user timeout": {unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
		} {
			v, err := unix.GetsockoptInt(int(fd), opt[0], opt[1])
			require.NoError(t, err, name)
			got[name] = v
		}
	}))
	require.Equal(t, map[string]int{"keepalive": 1, "idle": 4, "interval": 2, "count": 4, "user timeout": 12000}, got)
}
