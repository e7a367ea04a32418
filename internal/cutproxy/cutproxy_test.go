package cutproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/cutproxy"
)

// echoServer answers each line with itself; it is closed when t ends.
func echoServer(t *testing.T) string {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return echo.Addr().String()
}

// roundTrip sends msg as a line on c and reads the answer, within wait.
func roundTrip(c net.Conn, msg string, wait time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestCutAndRestore: the proxy forwards to its target; Cut ends the open connection and refuses
// new ones; Restore accepts again on the same address.
func TestCutAndRestore(t *testing.T) {
	t.Parallel()
	p := cutproxy.New(t, echoServer(t))
	roundTrip := func(c net.Conn, msg string) (string, error) { return roundTrip(c, msg, 10*time.Second) }

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	got, err := roundTrip(c, "hello")
	require.NoError(t, err)
	require.Equal(t, "hello\n", got)

	p.Cut()
	_, err = roundTrip(c, "again")
	require.Error(t, err, "the open connection is cut")
	_, err = net.Dial("tcp", p.Addr())
	require.Error(t, err, "new connections are refused")

	p.Restore()
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	got, err = roundTrip(c2, "back")
	require.NoError(t, err)
	require.Equal(t, "back\n", got)
}

// TestBlackholeAndRestore: while blackholed, the open connection stays open but nothing comes
// back, and a new connection is accepted but answers nothing; after Restore both carry traffic
// again, the open one delivering what was sent meanwhile.
func TestBlackholeAndRestore(t *testing.T) {
	t.Parallel()
	p := cutproxy.New(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	got, err := roundTrip(c, "hello", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "hello\n", got)

	p.Blackhole()
	_, err = roundTrip(c, "held", 300*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "no answer: the read times out")
	require.True(t, ne.Timeout(), "the connection is not closed, it only stays silent: %v", err)
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err, "new connections are accepted")
	defer c2.Close()
	_, err = roundTrip(c2, "new", 300*time.Millisecond)
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "a new connection answers nothing either: %v", err)

	p.Restore()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	got, err = bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", got, "what was sent during the blackhole is delivered after it")
	require.NoError(t, c2.SetDeadline(time.Now().Add(10*time.Second)))
	got, err = bufio.NewReader(c2).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "new\n", got)
	got, err = roundTrip(c, "after", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "after\n", got)
}
