package cutproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/cutproxy"
)

// TestCutAndRestore: the proxy forwards to its target; Cut ends the open connection and refuses
// new ones; Restore accepts again on the same address.
func TestCutAndRestore(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer echo.Close()
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
	p := cutproxy.New(t, echo.Addr().String())
	roundTrip := func(c net.Conn, msg string) (string, error) {
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return "", err
		}
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return "", err
		}
		return bufio.NewReader(c).ReadString('\n')
	}

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
