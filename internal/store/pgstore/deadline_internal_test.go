package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestApplyTimeouts: the connections' connect timeout, dialer and server-side settings follow the
// options, and what the URL sets wins; negative options leave the defaults of pgx and the server.
func TestApplyTimeouts(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig("postgres://u@h/db")
	require.NoError(t, err)
	applyTimeouts(cfg, timeoutsOf(Options{}))
	rp := cfg.ConnConfig.RuntimeParams
	require.Equal(t, DefaultClientTimeout, cfg.ConnConfig.ConnectTimeout)
	require.NotNil(t, cfg.ConnConfig.DialFunc)
	require.Equal(t, "15000", rp["tcp_user_timeout"])
	require.Equal(t, "5", rp["tcp_keepalives_idle"])
	require.Equal(t, "2", rp["tcp_keepalives_interval"])
	require.Equal(t, "4", rp["tcp_keepalives_count"])
	require.Equal(t, "16000", rp["idle_in_transaction_session_timeout"])

	cfg, err = pgxpool.ParseConfig("postgres://u@h/db?connect_timeout=2&tcp_user_timeout=1000&idle_in_transaction_session_timeout=0")
	require.NoError(t, err)
	applyTimeouts(cfg, timeoutsOf(Options{ClientTimeout: time.Second, TCPTimeout: 3 * time.Second}))
	rp = cfg.ConnConfig.RuntimeParams
	require.Equal(t, 2*time.Second, cfg.ConnConfig.ConnectTimeout, "the URL's connect_timeout wins")
	require.Equal(t, "1000", rp["tcp_user_timeout"], "the URL's setting wins")
	require.Equal(t, "0", rp["idle_in_transaction_session_timeout"], "the URL's setting wins")
	require.Equal(t, "1", rp["tcp_keepalives_idle"], "at least a second")

	cfg, err = pgxpool.ParseConfig("postgres://u@h/db")
	require.NoError(t, err)
	applyTimeouts(cfg, timeoutsOf(Options{ClientTimeout: -1, TCPTimeout: -1}))
	require.Zero(t, cfg.ConnConfig.ConnectTimeout)
	for _, k := range []string{"tcp_user_timeout", "tcp_keepalives_idle", "idle_in_transaction_session_timeout"} {
		require.NotContains(t, cfg.ConnConfig.RuntimeParams, k)
	}
}

// TestDeadline: an operation's contexts end at its deadline, or earlier when the caller's does,
// and are ended when the operation is over; without a bound the caller's context is used as it is.
func TestDeadline(t *testing.T) {
	t.Parallel()
	var d deadline
	d.arm(time.Hour)
	ctx := d.bound(context.Background())
	at, ok := ctx.Deadline()
	require.True(t, ok)
	require.WithinDuration(t, time.Now().Add(time.Hour), at, time.Minute)
	require.Equal(t, ctx, d.bound(context.Background()), "one bounded background per operation")
	sooner, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.Equal(t, sooner, d.bound(sooner), "a caller's earlier deadline stays")
	later, cancelLater := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancelLater()
	bounded := d.bound(later)
	at, _ = bounded.Deadline()
	require.WithinDuration(t, time.Now().Add(time.Hour), at, time.Minute, "a caller's later deadline is brought in")

	d.release()
	require.ErrorIs(t, ctx.Err(), context.Canceled, "the operation is over")
	require.ErrorIs(t, bounded.Err(), context.Canceled)
	d.arm(0)
	require.Equal(t, later, d.bound(later), "no bound: the caller's context")
}
