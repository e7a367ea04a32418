package e2e

// Bounded responses: viewers of the largest list page who request it and never read the answer cost
// the server a bounded amount of memory (each page is held to its byte budget and written item by
// item), and everyone else is still served promptly.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dialStalled opens a connection to addr whose receive buffer is as small as the kernel allows, so
// that a client that does not read stops the server's writes after a few KiB.
func dialStalled(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	return d.Dial("tcp", addr)
}

func TestNonReadingListViewers(t *testing.T) {
	if testing.Short() {
		t.Skip("non-reading list viewers: stores 60 MB of results; skipped with -short")
	}
	t.Parallel()
	// A write timeout of 3 s ends the answers the viewers do not read; 25 requests in flight leave
	// room for the viewers and one call, not for ten more while the viewers' answers are pending.
	const writeTimeout = 3 * time.Second
	p := startLark(t, t.TempDir(), "--write-timeout", writeTimeout.String(), "--max-in-flight", "25")
	p.tenant(t, "viewers")
	tok := p.token(t, "viewers", "vera", "developer")
	big := p.register(t, tok, fnSpec{id: fnPrefix + "vendor.app.viewers.big.v1~",
		src: "def main(ctx, input):\n  return {\"blob\": \"x\" * 2000000}\n"})
	small := p.register(t, tok, fnSpec{id: fnPrefix + "vendor.app.viewers.small.v1~",
		src: "def main(ctx, input):\n  return {\"sum\": input.a + input.b}\n"})

	// Thirty invocations whose results are 2 MB each: the largest list page (limit=200) would be
	// 60 MB if it were built whole. Started async, eight at a time (a sync call would also carry
	// each result back), then waited for through a filter whose page holds no result.
	t0 := time.Now()
	var starts sync.WaitGroup
	gate := make(chan struct{}, 8)
	startErrs := make([]error, 30)
	for i := range startErrs {
		starts.Add(1)
		gate <- struct{}{}
		go func() {
			defer func() { <-gate; starts.Done() }()
			r, err := p.try(httpClient, http.MethodPost, apiBase+"/invocations", tok,
				[]byte(`{"entrypoint_id":"`+big+`","mode":"async","params":{}}`))
			if err == nil && r.Status != http.StatusAccepted {
				err = fmt.Errorf("start: %s", r)
			}
			startErrs[i] = err
		}()
	}
	starts.Wait()
	for i, err := range startErrs {
		require.NoError(t, err, "start %d", i)
	}
	unfinished := apiBase + "/invocations?limit=1&%24filter=" + url.QueryEscape("status in ('queued', 'running')")
	for deadline := time.Now().Add(time.Minute); ; {
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		requireJSON(t, p.do(http.MethodGet, unfinished, tok, nil), http.StatusOK, &page)
		if len(page.Items) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the 30 invocations have not finished")
		time.Sleep(50 * time.Millisecond)
	}
	var failed struct {
		Items []invocationRecord `json:"items"`
	}
	requireJSON(t, p.do(http.MethodGet, apiBase+"/invocations?limit=200&%24filter="+url.QueryEscape("status ne 'succeeded'"), tok, nil), http.StatusOK, &failed)
	require.Empty(t, failed.Items, "every invocation succeeded")
	t.Logf("30 invocations with 2 MB results stored in %v", time.Since(t0))
	call := func() time.Duration {
		start := time.Now()
		r := p.invoke(t, tok, small, "sync", map[string]any{"a": 1, "b": 2})
		d := time.Since(start)
		require.Equal(t, "succeeded", record(t, r, http.StatusOK).Status, "%s", r)
		return d
	}
	for range 5 {
		call() // warm up
	}
	pid := p.cmd.Process.Pid
	base := rssKB(pid)

	// Twenty viewers request the largest page and read nothing past its status line.
	const viewers = 20
	host := strings.TrimPrefix(p.URL, "http://")
	req := fmt.Sprintf("GET %s/invocations?limit=200 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", apiBase, host, tok)
	conns := make([]net.Conn, viewers)
	var wg sync.WaitGroup
	errs := make([]error, viewers)
	for i := range conns {
		c, err := dialStalled(host)
		require.NoError(t, err)
		conns[i] = c
		t.Cleanup(func() { c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Write([]byte(req)); err != nil {
				errs[i] = err
				return
			}
			// The status line says the server has read the page and is writing it.
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			line, err := bufio.NewReaderSize(c, 16).ReadString('\n')
			if err == nil && !strings.HasPrefix(line, "HTTP/1.1 200") {
				err = fmt.Errorf("status line %q", line)
			}
			errs[i] = err
		}()
	}
	var peak int64
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(20 * time.Millisecond):
		}
		peak = max(peak, rssKB(pid))
		require.Less(t, peak-base, int64(300*1024), "RSS grew by %d MiB while the viewers' pages were read", (peak-base)/1024)
	}
	for i, err := range errs {
		require.NoError(t, err, "viewer %d", i)
	}

	// While the twenty hold their answers unread, a normal call answers promptly.
	var slowest time.Duration
	for range 10 {
		slowest = max(slowest, call())
		peak = max(peak, rssKB(pid))
	}
	t.Logf("RSS %d MiB before the viewers, peak %d MiB (+%d MiB); slowest of 10 sync calls meanwhile %v",
		base/1024, peak/1024, (peak-base)/1024, slowest)
	require.Less(t, peak-base, int64(300*1024), "RSS growth with %d non-reading viewers", viewers)
	require.Less(t, slowest, time.Second, "a sync call while %d viewers hold their pages unread", viewers)

	// The write timeout ends the unread answers: their requests stop counting against the tenant's
	// requests in flight, and ten at once are served while the viewers are still connected.
	small10 := apiBase + "/invocations?limit=1&%24filter=" + url.QueryEscape("status eq 'queued'")
	var refused []int
	for deadline := time.Now().Add(writeTimeout + 10*time.Second); ; {
		statuses := make([]int, 10)
		var burst sync.WaitGroup
		for i := range statuses {
			burst.Add(1)
			go func() {
				defer burst.Done()
				if r, err := p.try(httpClient, http.MethodGet, small10, tok, nil); err == nil {
					statuses[i] = r.Status
				}
			}()
		}
		burst.Wait()
		n429 := 0
		for _, st := range statuses {
			if st == http.StatusTooManyRequests {
				n429++
			}
		}
		refused = append(refused, n429)
		if n429 == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the viewers' requests still count as in flight after the write timeout: %v", refused)
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("requests refused (429) of bursts of ten while the viewers' answers were pending: %v", refused)
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
}
