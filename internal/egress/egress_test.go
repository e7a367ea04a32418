package egress

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ---------------------------------------------------------------------------------------------
// helpers

type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// newServer starts an httptest server on 127.0.0.1 and counts accepted connections.
func newServer(t testing.TB, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	n := new(atomic.Int32)
	srv.Listener = countingListener{Listener: srv.Listener, n: n}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, n
}

func serverPort(srv *httptest.Server) int {
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// newClient builds a client and counts the dial attempts that reach the socket layer.
func newClient(t testing.TB, o Options) (*Client, *atomic.Int32) {
	t.Helper()
	c := New(o)
	n := new(atomic.Int32)
	inner := c.dial
	c.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		n.Add(1)
		return inner(ctx, network, address)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c, n
}

// fakeLookup maps host names to addresses; unknown names fail like NXDOMAIN.
func fakeLookup(m map[string][]string) func(context.Context, string) ([]net.IP, error) {
	return func(_ context.Context, host string) ([]net.IP, error) {
		addrs, ok := m[strings.TrimSuffix(host, ".")]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		out := make([]net.IP, 0, len(addrs))
		for _, a := range addrs {
			out = append(out, net.ParseIP(a))
		}
		return out, nil
	}
}

func requireKind(t *testing.T, err error, want Kind) {
	t.Helper()
	_ = kindError(t, err, want)
}

// kindError is requireKind for a test that goes on to check the *Error's other fields.
func kindError(t *testing.T, err error, want Kind) *Error {
	t.Helper()
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e), "error %T %v is not *Error", err, err)
	require.Equal(t, want, e.Kind, "error: %v", err)
	return e
}

// ---------------------------------------------------------------------------------------------
// success paths

func TestGetSuccess(t *testing.T) {
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/items" || r.URL.Query().Get("q") != "x" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Reply", r.Header.Get("X-Api-Key"))
		w.Header()["x-lower"] = []string{"first", "second"}
		w.Header().Set("X-User-Agent", r.Header.Get("User-Agent"))
		w.Header().Set("X-Host", r.Host)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	c, _ := newClient(t, Options{AllowLoopback: true, LookupIP: fakeLookup(map[string][]string{
		"api.example.com": {"127.0.0.1"},
	})})
	url := fmt.Sprintf("http://API.Example.com:%d/v1/items?q=x", serverPort(srv))
	resp, err := c.Do(context.Background(), Request{
		Method:         "GET",
		URL:            url,
		Headers:        map[string]string{"x-api-key": "k-123"},
		AllowedDomains: []string{"api.example.com"},
	})
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, `{"ok":true}`, string(resp.Body))
	require.Equal(t, "k-123", resp.Headers["X-Reply"])
	require.Equal(t, "first", resp.Headers["X-Lower"], "canonical name, first value")
	require.Equal(t, "application/json", resp.Headers["Content-Type"])
	require.Equal(t, userAgent, resp.Headers["X-User-Agent"])
	require.Equal(t, fmt.Sprintf("API.Example.com:%d", serverPort(srv)), resp.Headers["X-Host"])
	require.Equal(t, "api.example.com", resp.Host)
	require.Greater(t, resp.Duration, time.Duration(0))
}

func TestPostSuccess(t *testing.T) {
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-Content-Type", r.Header.Get("Content-Type"))
		w.Header().Set("X-Content-Length", strconv.FormatInt(r.ContentLength, 10))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	}))
	c, _ := newClient(t, Options{AllowLoopback: true})
	body := []byte(`{"name":"lark"}`)
	resp, err := c.Do(context.Background(), Request{
		Method:         "POST",
		URL:            srv.URL + "/things",
		Headers:        map[string]string{"Content-Type": "application/json", "User-Agent": "custom/1"},
		Body:           body,
		AllowedDomains: []string{"*"},
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, body, resp.Body)
	require.Equal(t, "POST", resp.Headers["X-Method"])
	require.Equal(t, "application/json", resp.Headers["X-Content-Type"])
	require.Equal(t, strconv.Itoa(len(body)), resp.Headers["X-Content-Length"])
	require.Equal(t, "127.0.0.1", resp.Host)

	// Empty POST and empty response body.
	resp, err = c.Do(context.Background(), Request{Method: "POST", URL: srv.URL, AllowedDomains: []string{"*"}})
	require.NoError(t, err)
	require.Equal(t, "0", resp.Headers["X-Content-Length"])
	require.NotNil(t, resp.Body)
	require.Empty(t, resp.Body)
}

func TestNon2xxIsNotAnError(t *testing.T) {
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusTeapot)
	}))
	c, _ := newClient(t, Options{AllowLoopback: true})
	resp, err := c.Do(context.Background(), Request{Method: "GET", URL: srv.URL, AllowedDomains: []string{"*"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusTeapot, resp.StatusCode)
	require.Equal(t, "nope\n", string(resp.Body))
}

func TestConcurrentUseSharesConnections(t *testing.T) {
	srv, accepted := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Query().Get("i"))
	}))
	c, _ := newClient(t, Options{AllowLoopback: true})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				want := fmt.Sprintf("%d-%d", g, i)
				resp, err := c.Do(context.Background(), Request{Method: "GET", URL: srv.URL + "/?i=" + want, AllowedDomains: []string{"*"}})
				if err != nil {
					errs <- err
					return
				}
				if string(resp.Body) != want {
					errs <- fmt.Errorf("got %q want %q", resp.Body, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, accepted.Load(), int32(16), "keep-alive connections are reused")
}

// ---------------------------------------------------------------------------------------------
// allowlist

func TestDomainAllowedMatrix(t *testing.T) {
	cases := []struct {
		host    string
		allowed []string
		want    bool
	}{
		// exact
		{"api.example.com", []string{"api.example.com"}, true},
		{"api.example.com", []string{"example.com"}, false},
		{"example.com", []string{"api.example.com"}, false},
		// wildcard depth
		{"a.example.com", []string{"*.example.com"}, true},
		{"a.b.c.example.com", []string{"*.example.com"}, true},
		// apex is not matched by a wildcard
		{"example.com", []string{"*.example.com"}, false},
		{"example.com", []string{"*.example.com", "example.com"}, true},
		// suffix attacks
		{"evilexample.com", []string{"*.example.com"}, false},
		{"evilexample.com", []string{"example.com"}, false},
		{"example.com.evil.net", []string{"*.example.com"}, false},
		{"example.com.evil.net", []string{"example.com"}, false},
		{"a.example.com.evil.net", []string{"*.example.com"}, false},
		// trailing dot, on either side
		{"api.example.com.", []string{"api.example.com"}, true},
		{"api.example.com", []string{"api.example.com."}, true},
		{"a.example.com.", []string{"*.example.com"}, true},
		{"example.com.", []string{"*.example.com"}, false},
		{"api.example.com..", []string{"api.example.com"}, false},
		// case
		{"API.EXAMPLE.COM", []string{"api.example.com"}, true},
		{"X.Example.Com", []string{"*.example.com"}, true},
		{"api.example.com", []string{"API.Example.COM"}, true},
		// empty list allows nothing
		{"api.example.com", nil, false},
		{"api.example.com", []string{}, false},
		{"api.example.com", []string{""}, false},
		// "*" allows any host, including IP literals
		{"anything.example.org", []string{"*"}, true},
		{"93.184.216.34", []string{"*"}, true},
		{"[2606:4700::1111]", []string{"*"}, true},
		// an IP literal entry matches exactly that address, and nothing else
		{"93.184.216.34", []string{"93.184.216.34"}, true},
		{"93.184.216.35", []string{"93.184.216.34"}, false},
		{"93.184.216.34", []string{"*.216.34"}, false},
		{"93.184.216.34", []string{"93.184.216.34/32"}, false},
		{"93.184.216.34", []string{"93.184.216.0/24"}, false},
		{"93.184.216.34", []string{"example.com"}, false},
		{"example.com", []string{"93.184.216.34"}, false},
		{"2606:4700::1111", []string{"2606:4700::1111"}, true},
		{"[2606:4700::1111]", []string{"2606:4700:0:0::1111"}, true},
		{"[2606:4700::1112]", []string{"2606:4700::1111"}, false},
		{"[::ffff:93.184.216.34]", []string{"93.184.216.34"}, true},
		{"93.184.216.34", []string{"::ffff:93.184.216.34"}, true},
		// malformed entries and hosts never match
		{"api.example.com", []string{"*."}, false},
		{"api.example.com", []string{"*.*.com"}, false},
		{"api.example.com", []string{"api.*.com"}, false},
		{"api.example.com", []string{"**.example.com"}, false},
		{"api.example.com", []string{"api.example.com:443"}, false},
		{"", []string{"*"}, false},
		{".example.com", []string{"*.example.com"}, false},
		{"a..example.com", []string{"*.example.com"}, false},
		{"a b.example.com", []string{"*.example.com"}, false},
		{"ex\u0430mple.com", []string{"*"}, false}, // non-ASCII (Cyrillic a)
		{"api.example.com", []string{" api.example.com "}, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s|%s", tc.host, strings.Join(tc.allowed, ",")), func(t *testing.T) {
			require.Equal(t, tc.want, DomainAllowed(tc.host, tc.allowed))
		})
	}
}

func TestDoForbiddenDomain(t *testing.T) {
	srv, accepted := newServer(t, http.NotFoundHandler())
	c, dials := newClient(t, Options{AllowLoopback: true, LookupIP: fakeLookup(map[string][]string{
		"evilexample.com": {"127.0.0.1"},
		"example.com":     {"127.0.0.1"},
	})})
	port := serverPort(srv)
	for _, tc := range []struct {
		url     string
		allowed []string
	}{
		{fmt.Sprintf("http://evilexample.com:%d/", port), []string{"*.example.com"}},
		{fmt.Sprintf("http://example.com:%d/", port), []string{"*.example.com"}},
		{fmt.Sprintf("http://example.com:%d/", port), nil},
		{fmt.Sprintf("http://127.0.0.1:%d/", port), []string{"*.example.com", "127.0.0.2"}},
		{fmt.Sprintf("http://127.0.0.1:%d/", port), []string{"127.0.0.0/8"}},
	} {
		_, err := c.Do(context.Background(), Request{Method: "GET", URL: tc.url, AllowedDomains: tc.allowed})
		requireKind(t, err, KindForbiddenDomain)
	}
	require.Zero(t, dials.Load())
	require.Zero(t, accepted.Load())
}

func TestValidateEntry(t *testing.T) {
	for _, ok := range []string{"*", "api.example.com", "*.example.com", "example", "a-b.c0", "93.184.216.34",
		"127.0.0.1", "2606:4700::1111", "::1", "::ffff:1.2.3.4"} {
		require.NoError(t, ValidateEntry(ok), ok)
	}
	for _, bad := range []struct{ entry, msg string }{
		{"1.2.3", "host name"},
		{"1.2.3.4.5", "host name"},
		{"*.1.2.3.4", "host name"},
		{"0x7f.1", "host name"},
		{"010.0.0.1", "host name"},
		{"exa mple.com", "host name"},
		{"Example.com", "host name"},
		{"api.example.com:443", "host name"},
		{"*.", "host name"},
		{"", "host name"},
		{"[::1]", "host name"},
		{"fe80::1%eth0", "zone"},
		{"10.0.0.0/8", "CIDR"},
		{"2001:db8::/32", "CIDR"},
		{"1.2.3.4/32", "CIDR"},
	} {
		err := ValidateEntry(bad.entry)
		require.Error(t, err, bad.entry)
		require.Contains(t, err.Error(), bad.msg, bad.entry)
	}
}

// TestAllowedIPLiteral: an IP literal in the allowlist lets requests to exactly that address
// through, and the address rules still apply to it.
func TestAllowedIPLiteral(t *testing.T) {
	srv, accepted := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok") // a failed write is the client gone, which the test sees
	}))
	u := fmt.Sprintf("http://127.0.0.1:%d/", serverPort(srv))

	loop, _ := newClient(t, Options{AllowLoopback: true}) // test-only: the upstream is on loopback
	resp, err := loop.Do(context.Background(), Request{Method: "GET", URL: u, AllowedDomains: []string{"127.0.0.1"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", string(resp.Body))
	require.EqualValues(t, 1, accepted.Load())

	_, err = loop.Do(context.Background(), Request{Method: "GET", URL: u, AllowedDomains: []string{"127.0.0.2"}})
	requireKind(t, err, KindForbiddenDomain)

	// Without the test-only switch, 127.0.0.1 is a loopback address: allowed by name, refused by
	// the address rules, before any connection.
	strict, dials := newClient(t, Options{})
	_, err = strict.Do(context.Background(), Request{Method: "GET", URL: u, AllowedDomains: []string{"127.0.0.1"}})
	requireKind(t, err, KindForbiddenAddress)
	require.Zero(t, dials.Load())
	require.EqualValues(t, 1, accepted.Load())
}

// ---------------------------------------------------------------------------------------------
// address rules

func TestSSRFLiteralAddressesRefusedWithoutConnecting(t *testing.T) {
	srv, accepted := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("server reached: %s", r.URL)
	}))
	port := serverPort(srv)
	c, dials := newClient(t, Options{}) // AllowLoopback=false
	urls := []string{
		fmt.Sprintf("http://127.0.0.1:%d/", port), // a real listening server
		fmt.Sprintf("http://127.1.2.3:%d/", port),
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"http://10.0.0.1/",
		"http://172.16.5.4/",
		"http://192.168.1.1/",
		fmt.Sprintf("http://[::1]:%d/", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port),
		"http://[::ffff:169.254.169.254]/",
		"http://[::ffff:a9fe:a9fe]/",
		"http://[::127.0.0.1]/",
		"http://[64:ff9b::a9fe:a9fe]/",
		"http://[2002:a00:1::]/",
		"http://[fe80::1]/",
		"http://[fd00:ec2::254]/",
		"http://[::]/",
		"http://[ff02::1]/",
		"http://0.0.0.0/",
		fmt.Sprintf("http://0.0.0.0:%d/", port),
		"http://0.1.2.3/",
		"http://100.100.100.200/",
		"http://192.0.0.170/",
		"http://198.18.0.1/",
		"http://192.0.2.1/",
		"http://224.0.0.1/",
		"http://255.255.255.255/",
		"https://240.0.0.1/",
	}
	for _, u := range urls {
		t.Run(u, func(t *testing.T) {
			_, err := c.Do(context.Background(), Request{Method: "GET", URL: u, AllowedDomains: []string{"*"}})
			e := kindError(t, err, KindForbiddenAddress)
			require.NotEmpty(t, e.Host)
		})
	}
	require.Zero(t, dials.Load(), "no dial may be attempted")
	require.Zero(t, accepted.Load(), "no connection may reach the server")
}

func TestAddrReason(t *testing.T) {
	blocked := []string{
		"127.0.0.1", "127.255.255.254", "10.1.2.3", "172.31.255.255", "192.168.0.1", "169.254.169.254",
		"100.64.0.1", "100.127.255.255", "0.0.0.0", "0.255.255.255", "192.0.0.1", "198.19.255.255",
		"192.0.2.5", "198.51.100.5", "203.0.113.5", "224.0.0.251", "239.255.255.250", "240.0.0.1",
		"255.255.255.255", "192.88.99.1",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:0.0.0.0", "::7f00:1", "::a00:1",
		"fc00::1", "fd12:3456::1", "fe80::1", "febf::1", "fec0::1", "ff02::1", "100::1",
		"64:ff9b::127.0.0.1", "64:ff9b::10.0.0.1", "64:ff9b:1::1", "2002:7f00:1::1", "2002:c0a8:101::1",
		"2001::1", "2001:2::1", "2001:db8::1", "3fff::1", "5f00::1", "4000::1", "::ffff:100.64.0.1",
	}
	for _, s := range blocked {
		a := netip.MustParseAddr(s)
		require.NotEmpty(t, addrReason(a, false), "%s must be blocked", s)
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255",
		"172.32.0.0", "192.169.0.1", "198.17.255.255", "198.20.0.0", "223.255.255.255",
		"::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1", "2606:4700::1111", "2a00:1450::1",
	}
	for _, s := range allowed {
		a := netip.MustParseAddr(s)
		require.Empty(t, addrReason(a, false), "%s must be allowed", s)
	}
	require.NotEmpty(t, addrReason(netip.Addr{}, false))
	require.NotEmpty(t, addrReason(netip.MustParseAddr("2606:4700::1111%eth0"), false), "zoned")

	// AllowLoopback exempts exactly 127.0.0.0/8 and ::1.
	require.Empty(t, addrReason(netip.MustParseAddr("127.0.0.1"), true))
	require.Empty(t, addrReason(netip.MustParseAddr("127.9.9.9"), true))
	require.Empty(t, addrReason(netip.MustParseAddr("::1"), true))
	for _, s := range []string{"10.0.0.1", "169.254.169.254", "0.0.0.0", "::", "fe80::1", "::ffff:127.0.0.1", "192.168.1.1"} {
		require.NotEmpty(t, addrReason(netip.MustParseAddr(s), true), "%s stays blocked with AllowLoopback", s)
	}
}

func TestDialerControlRechecksSocketAddress(t *testing.T) {
	c := New(Options{})
	for _, addr := range []string{"10.0.0.1:80", "169.254.169.254:80", "127.0.0.1:8080", "[::1]:80", "[::ffff:127.0.0.1]:80"} {
		network := "tcp4"
		if strings.HasPrefix(addr, "[") {
			network = "tcp6"
		}
		requireKind(t, c.control(network, addr, nil), KindForbiddenAddress)
	}
	require.NoError(t, c.control("tcp4", "8.8.8.8:443", nil))
	requireKind(t, c.control("udp4", "8.8.8.8:53", nil), KindForbiddenAddress)
	requireKind(t, c.control("tcp4", "garbage", nil), KindForbiddenAddress)

	lc := New(Options{AllowLoopback: true})
	require.NoError(t, lc.control("tcp4", "127.0.0.1:8080", nil))
	require.NoError(t, lc.control("tcp6", "[::1]:8080", nil))
	requireKind(t, lc.control("tcp4", "10.0.0.1:80", nil), KindForbiddenAddress)

	// The real dialer enforces it too, independently of dialContext's own check.
	_, err := c.dial(context.Background(), "tcp", "127.0.0.1:1")
	requireKind(t, err, KindForbiddenAddress)
}

func TestHostnameResolvingToForbiddenAddressRefused(t *testing.T) {
	srv, accepted := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("server reached: %s", r.URL)
	}))
	port := serverPort(srv)
	c, dials := newClient(t, Options{LookupIP: fakeLookup(map[string][]string{
		"internal.example.com": {"127.0.0.1"},
		"meta.example.com":     {"169.254.169.254"},
		"mixed.example.com":    {"93.184.216.34", "10.0.0.1"}, // one bad answer spoils the set
		"mapped.example.com":   {"::ffff:192.168.0.1"},
		"v6.example.com":       {"fd00::1"},
	})})
	for _, host := range []string{"internal.example.com", "meta.example.com", "mixed.example.com", "mapped.example.com", "v6.example.com"} {
		_, err := c.Do(context.Background(), Request{
			Method:         "GET",
			URL:            fmt.Sprintf("http://%s:%d/", host, port),
			AllowedDomains: []string{"*.example.com"},
		})
		e := kindError(t, err, KindForbiddenAddress)
		require.Equal(t, host, e.Host)
	}
	require.Zero(t, dials.Load())
	require.Zero(t, accepted.Load())

	// Unknown names are a transport (DNS) failure.
	_, err := c.Do(context.Background(), Request{Method: "GET", URL: "http://nx.example.com/", AllowedDomains: []string{"*"}})
	requireKind(t, err, KindTransport)
}

// dnsStub answers every A query with addr and every other query with no records, speaking DNS
// over a stream (net.Pipe), so no socket is involved.
func dnsStub(addr netip.Addr) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			client, server := net.Pipe()
			go serveDNSStream(server, addr)
			return client, nil
		},
	}
}

func serveDNSStream(conn net.Conn, addr netip.Addr) {
	defer conn.Close()
	for {
		var l [2]byte
		if _, err := io.ReadFull(conn, l[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(conn, msg); err != nil || len(msg) < 12 {
			return
		}
		// Skip the question name.
		i := 12
		for i < len(msg) && msg[i] != 0 {
			i += int(msg[i]) + 1
		}
		if i+5 > len(msg) {
			return
		}
		qEnd := i + 5
		qtype := binary.BigEndian.Uint16(msg[i+1 : i+3])
		resp := make([]byte, 0, 512)
		resp = append(resp, msg[0], msg[1]) // id
		resp = append(resp, 0x85, 0x80)     // QR, AA, RD, RA; NOERROR
		resp = append(resp, 0, 1)           // QDCOUNT
		var answer []byte
		if qtype == 1 && addr.Is4() {
			a4 := addr.As4()
			answer = append(answer, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
			answer = append(answer, a4[:]...)
			resp = append(resp, 0, 1)
		} else {
			resp = append(resp, 0, 0)
		}
		resp = append(resp, 0, 0, 0, 0) // NSCOUNT, ARCOUNT
		resp = append(resp, msg[12:qEnd]...)
		resp = append(resp, answer...)
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := conn.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

func TestResolverIsUsedAndChecked(t *testing.T) {
	srv, accepted := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "reached")
	}))
	port := serverPort(srv)
	url := fmt.Sprintf("http://rebind.example.com:%d/", port)
	req := Request{Method: "GET", URL: url, AllowedDomains: []string{"rebind.example.com"}}

	// Production settings: the name resolves to loopback and is refused before dialing.
	c, dials := newClient(t, Options{Resolver: dnsStub(netip.MustParseAddr("127.0.0.1"))})
	_, err := c.Do(context.Background(), req)
	e := kindError(t, err, KindForbiddenAddress)
	require.Contains(t, e.Msg, "loopback")
	require.Zero(t, dials.Load())
	require.Zero(t, accepted.Load())

	// Metadata address through DNS.
	c, dials = newClient(t, Options{Resolver: dnsStub(netip.MustParseAddr("169.254.169.254"))})
	_, err = c.Do(context.Background(), req)
	requireKind(t, err, KindForbiddenAddress)
	require.Zero(t, dials.Load())

	// With the test switch the same resolver path reaches the server, proving it is used.
	c, _ = newClient(t, Options{AllowLoopback: true, Resolver: dnsStub(netip.MustParseAddr("127.0.0.1"))})
	resp, err := c.Do(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "reached", string(resp.Body))
}

// ---------------------------------------------------------------------------------------------
// redirects

func TestRedirectSameOriginKeepsCredentials(t *testing.T) {
	var seen atomic.Value
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/end", http.StatusFound)
			return
		}
		seen.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("Cookie"))
		_, _ = io.WriteString(w, "end")
	}))
	c, _ := newClient(t, Options{AllowLoopback: true})
	resp, err := c.Do(context.Background(), Request{
		Method: "GET", URL: srv.URL + "/start", AllowedDomains: []string{"*"},
		Headers: map[string]string{"Authorization": "Bearer tok", "Cookie": "a=b"},
	})
	require.NoError(t, err)
	require.Equal(t, "end", string(resp.Body))
	require.Equal(t, "Bearer tok|a=b", seen.Load())
}

func TestRedirectCrossHostStripsCredentials(t *testing.T) {
	type got struct{ auth, cookie, other, method, body string }
	seen := make(chan got, 1)
	target, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Header.Get("X-Other"), r.Method, string(b)}
		_, _ = io.WriteString(w, "target")
	}))
	origin, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Redirect(w, r, fmt.Sprintf("http://b.example.com:%d/landing", serverPort(target)), code)
	}))
	c, _ := newClient(t, Options{AllowLoopback: true, LookupIP: fakeLookup(map[string][]string{
		"a.example.com": {"127.0.0.1"},
		"b.example.com": {"127.0.0.1"},
	})})
	for _, tc := range []struct {
		code               int
		wantMethod, wantBd string
	}{
		{http.StatusFound, "GET", ""},
		{http.StatusSeeOther, "GET", ""},
		{http.StatusMovedPermanently, "GET", ""},
		{http.StatusTemporaryRedirect, "POST", "payload"},
		{http.StatusPermanentRedirect, "POST", "payload"},
	} {
		resp, err := c.Do(context.Background(), Request{
			Method:         "POST",
			URL:            fmt.Sprintf("http://a.example.com:%d/start?code=%d", serverPort(origin), tc.code),
			Body:           []byte("payload"),
			AllowedDomains: []string{"*.example.com"},
			Headers:        map[string]string{"Authorization": "Bearer tok", "Cookie": "sid=1", "X-Other": "kept"},
		})
		require.NoError(t, err, "code %d", tc.code)
		require.Equal(t, "target", string(resp.Body))
		require.Equal(t, "b.example.com", resp.Host)
		g := <-seen
		require.Empty(t, g.auth, "Authorization stripped (code %d)", tc.code)
		require.Empty(t, g.cookie, "Cookie stripped (code %d)", tc.code)
		require.Equal(t, "kept", g.other)
		require.Equal(t, tc.wantMethod, g.method, "code %d", tc.code)
		require.Equal(t, tc.wantBd, g.body, "code %d", tc.code)
	}
}

func TestRedirectToForbiddenTargets(t *testing.T) {
	var reachedEvil atomic.Int32
	evil, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reachedEvil.Add(1) }))
	var location atomic.Value
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", location.Load().(string))
		w.WriteHeader(http.StatusFound)
	}))
	lookup := fakeLookup(map[string][]string{
		"api.example.com":      {"127.0.0.1"},
		"internal.example.com": {"10.0.0.1"},
		"evil.net":             {"127.0.0.1"},
	})
	start := fmt.Sprintf("http://api.example.com:%d/", serverPort(srv))
	for _, tc := range []struct {
		location string
		allowed  []string
		kind     Kind
	}{
		{"http://169.254.169.254/latest/meta-data/", []string{"*"}, KindForbiddenAddress},
		{"http://10.0.0.1/admin", []string{"*"}, KindForbiddenAddress},
		{"http://[::ffff:10.0.0.1]/", []string{"*"}, KindForbiddenAddress},
		{"http://internal.example.com/", []string{"*.example.com"}, KindForbiddenAddress},
		{fmt.Sprintf("http://evil.net:%d/", serverPort(evil)), []string{"*.example.com"}, KindForbiddenDomain},
		{fmt.Sprintf("http://127.0.0.1:%d/", serverPort(evil)), []string{"*.example.com"}, KindForbiddenDomain},
		{"ftp://api.example.com/file", []string{"*"}, KindTransport},
		{"file:///etc/passwd", []string{"*"}, KindTransport},
		{fmt.Sprintf("http://user:pw@api.example.com:%d/", serverPort(srv)), []string{"*"}, KindTransport},
		{"http://%zz/", []string{"*"}, KindTransport},
	} {
		t.Run(tc.location, func(t *testing.T) {
			location.Store(tc.location)
			c, dials := newClient(t, Options{AllowLoopback: true, LookupIP: lookup})
			_, err := c.Do(context.Background(), Request{Method: "GET", URL: start, AllowedDomains: tc.allowed})
			requireKind(t, err, tc.kind)
			require.Equal(t, int32(1), dials.Load(), "only the first hop is dialed")
		})
	}
	require.Zero(t, reachedEvil.Load())
}

func TestRedirectLimit(t *testing.T) {
	var hits atomic.Int32
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		stop, _ := strconv.Atoi(r.URL.Query().Get("stop"))
		if stop > 0 && n >= stop {
			_, _ = io.WriteString(w, "done "+strconv.Itoa(n))
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/%d?stop=%d", n+1, stop), http.StatusFound)
	}))

	c, _ := newClient(t, Options{AllowLoopback: true, MaxRedirects: 3})
	// Exactly MaxRedirects redirects are followed.
	resp, err := c.Do(context.Background(), Request{Method: "GET", URL: srv.URL + "/0?stop=3", AllowedDomains: []string{"*"}})
	require.NoError(t, err)
	require.Equal(t, "done 3", string(resp.Body))

	// One more is an error, and nothing beyond the limit is requested.
	hits.Store(0)
	_, err = c.Do(context.Background(), Request{Method: "GET", URL: srv.URL + "/0", AllowedDomains: []string{"*"}})
	e := kindError(t, err, KindTransport)
	require.Contains(t, e.Msg, "3 redirects")
	require.Equal(t, int32(4), hits.Load())

	// Default limit is 5.
	hits.Store(0)
	c5, _ := newClient(t, Options{AllowLoopback: true})
	_, err = c5.Do(context.Background(), Request{Method: "GET", URL: srv.URL + "/0", AllowedDomains: []string{"*"}})
	requireKind(t, err, KindTransport)
	require.Equal(t, int32(6), hits.Load())

	// Negative: none followed.
	hits.Store(0)
	c0, _ := newClient(t, Options{AllowLoopback: true, MaxRedirects: -1})
	_, err = c0.Do(context.Background(), Request{Method: "GET", URL: srv.URL + "/0", AllowedDomains: []string{"*"}})
	requireKind(t, err, KindTransport)
	require.Equal(t, int32(1), hits.Load())
}

func TestRedirectWithoutLocationIsReturned(t *testing.T) {
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusFound)
	}))
	c, _ := newClient(t, Options{AllowLoopback: true})
	resp, err := c.Do(context.Background(), Request{Method: "GET", URL: srv.URL, AllowedDomains: []string{"*"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusFound, resp.StatusCode)
}

// ---------------------------------------------------------------------------------------------
// timeouts and cancellation

// blockingServer never answers until the client gives up (or the test ends).
func blockingServer(t *testing.T, partialBody bool) *httptest.Server {
	done := make(chan struct{})
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if partialBody {
			w.Header().Set("Content-Length", "100")
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done) }) // runs before srv.Close (LIFO)
	return srv
}

func TestTimeout(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partialBody=%v", partial), func(t *testing.T) {
			srv := blockingServer(t, partial)
			c, _ := newClient(t, Options{AllowLoopback: true})
			start := time.Now()
			_, err := c.Do(context.Background(), Request{Method: "GET", URL: srv.URL, Timeout: 100 * time.Millisecond, AllowedDomains: []string{"*"}})
			requireKind(t, err, KindTimeout)
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}
}

func TestTimeoutSourcesAndCancellation(t *testing.T) {
	srv := blockingServer(t, false)
	req := Request{Method: "GET", URL: srv.URL, AllowedDomains: []string{"*"}}

	// DefaultTimeout applies when Request.Timeout is 0.
	c, _ := newClient(t, Options{AllowLoopback: true, DefaultTimeout: 100 * time.Millisecond})
	_, err := c.Do(context.Background(), req)
	requireKind(t, err, KindTimeout)

	// MaxTimeout caps a larger Request.Timeout.
	c, _ = newClient(t, Options{AllowLoopback: true, MaxTimeout: 100 * time.Millisecond})
	long := req
	long.Timeout = time.Hour
	start := time.Now()
	_, err = c.Do(context.Background(), long)
	requireKind(t, err, KindTimeout)
	require.Less(t, time.Since(start), 5*time.Second)

	// The caller's deadline wins when it is earlier.
	c, _ = newClient(t, Options{AllowLoopback: true})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Do(ctx, long)
	requireKind(t, err, KindTimeout)

	// Cancellation is KindCanceled.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = c.Do(ctx, long)
	requireKind(t, err, KindCanceled)

	// Already canceled.
	_, err = c.Do(ctx, req)
	requireKind(t, err, KindCanceled)
}

// ---------------------------------------------------------------------------------------------
// size limits

func TestResponseTooLarge(t *testing.T) {
	const limit = 1024
	srv, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", strconv.Itoa(n))
			_, _ = w.Write(make([]byte, n))
		case "/chunked":
			for i := 0; i < n; i += 100 {
				_, _ = w.Write(make([]byte, min(100, n-i)))
				w.(http.Flusher).Flush()
			}
		case "/endless":
			buf := make([]byte, 4096)
			for {
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
		}
	}))
	c, _ := newClient(t, Options{AllowLoopback: true, MaxResponseBytes: limit})
	get := func(path string) (Response, error) {
		return c.Do(context.Background(), Request{Method: "GET", URL: srv.URL + path, AllowedDomains: []string{"*"}})
	}
	for _, p := range []string{"/length", "/chunked"} {
		resp, err := get(fmt.Sprintf("%s?n=%d", p, limit))
		require.NoError(t, err, p)
		require.Len(t, resp.Body, limit)

		_, err = get(fmt.Sprintf("%s?n=%d", p, limit+1))
		requireKind(t, err, KindTooLarge)
	}
	start := time.Now()
	_, err := get("/endless")
	requireKind(t, err, KindTooLarge)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestRequestTooLarge(t *testing.T) {
	c, dials := newClient(t, Options{AllowLoopback: true, MaxRequestBytes: 10})
	_, err := c.Do(context.Background(), Request{Method: "POST", URL: "http://127.0.0.1:1/", Body: make([]byte, 11), AllowedDomains: []string{"*"}})
	requireKind(t, err, KindTooLarge)
	require.Zero(t, dials.Load())
}

// ---------------------------------------------------------------------------------------------
// bad requests

func TestBadRequests(t *testing.T) {
	c, dials := newClient(t, Options{AllowLoopback: true})
	ok := "http://api.example.com/"
	cases := []struct {
		name string
		req  Request
	}{
		{"userinfo", Request{Method: "GET", URL: "http://user:pass@api.example.com/"}},
		{"userinfo without password", Request{Method: "GET", URL: "https://token@api.example.com/"}},
		{"scheme ftp", Request{Method: "GET", URL: "ftp://api.example.com/"}},
		{"scheme file", Request{Method: "GET", URL: "file:///etc/passwd"}},
		{"scheme gopher", Request{Method: "GET", URL: "gopher://api.example.com:70/"}},
		{"relative", Request{Method: "GET", URL: "/just/a/path"}},
		{"no host", Request{Method: "GET", URL: "http:///path"}},
		{"opaque", Request{Method: "GET", URL: "http:api.example.com"}},
		{"empty", Request{Method: "GET", URL: ""}},
		{"unparseable", Request{Method: "GET", URL: "http://[::1"}},
		{"port zero", Request{Method: "GET", URL: "http://api.example.com:0/"}},
		{"port too big", Request{Method: "GET", URL: "http://api.example.com:65536/"}},
		{"non-ascii host", Request{Method: "GET", URL: "http://ex\u0430mple.com/"}},
		{"decimal ip", Request{Method: "GET", URL: "http://2130706433/"}},
		{"short ip", Request{Method: "GET", URL: "http://127.1/"}},
		{"octal ip", Request{Method: "GET", URL: "http://0177.0.0.1/"}},
		{"ipv6 zone", Request{Method: "GET", URL: "http://[fe80::1%25eth0]/"}},
		{"method PUT", Request{Method: "PUT", URL: ok}},
		{"method lower", Request{Method: "get", URL: ok}},
		{"method empty", Request{Method: "", URL: ok}},
		{"GET with body", Request{Method: "GET", URL: ok, Body: []byte("x")}},
		{"negative timeout", Request{Method: "GET", URL: ok, Timeout: -time.Second}},
		{"host header", Request{Method: "GET", URL: ok, Headers: map[string]string{"host": "internal"}}},
		{"transfer-encoding", Request{Method: "GET", URL: ok, Headers: map[string]string{"Transfer-Encoding": "chunked"}}},
		{"upgrade", Request{Method: "GET", URL: ok, Headers: map[string]string{"Upgrade": "h2c"}}},
		{"header crlf", Request{Method: "GET", URL: ok, Headers: map[string]string{"X-A": "v\r\nX-Injected: 1"}}},
		{"header name space", Request{Method: "GET", URL: ok, Headers: map[string]string{"X A": "v"}}},
		{"header name empty", Request{Method: "GET", URL: ok, Headers: map[string]string{"": "v"}}},
		{"duplicate header", Request{Method: "GET", URL: ok, Headers: map[string]string{"x-a": "1", "X-A": "2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.AllowedDomains = []string{"*"}
			_, err := c.Do(context.Background(), tc.req)
			requireKind(t, err, KindBadRequest)
		})
	}
	require.Zero(t, dials.Load())
}

// ---------------------------------------------------------------------------------------------
// secrets

func TestErrorsNeverLeakSecrets(t *testing.T) {
	const (
		querySecret  = "s3cret"
		headerSecret = "hunter2-very-secret"
		cookieSecret = "sid-c00kie-value"
		passSecret   = "pa55w0rd"
	)
	slow := blockingServer(t, false)
	big, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 4096))
	}))
	redir, _ := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://evil.net/?token="+querySecret+"&"+r.URL.RawQuery, http.StatusFound)
	}))
	garbage, _ := net.Listen("tcp", "127.0.0.1:0")
	t.Cleanup(func() { _ = garbage.Close() })
	go func() {
		for {
			conn, err := garbage.Accept()
			if err != nil {
				return
			}
			// Echo the request line back as a malformed status line.
			buf := make([]byte, 512)
			n, _ := conn.Read(buf)
			_, _ = conn.Write(append([]byte("NOT-HTTP "), buf[:n]...))
			_ = conn.Close()
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	_ = closed.Close()

	c, _ := newClient(t, Options{AllowLoopback: true, MaxResponseBytes: 100, LookupIP: fakeLookup(map[string][]string{
		"internal.example.com": {"10.0.0.1"},
		"api.example.com":      {"127.0.0.1"},
	})})
	headers := map[string]string{"Authorization": "Bearer " + headerSecret, "Cookie": cookieSecret, "X-Api-Key": headerSecret}
	q := "?token=" + querySecret + "&key=" + headerSecret
	cases := []struct {
		name    string
		req     Request
		allowed []string
	}{
		{"forbidden domain", Request{Method: "GET", URL: "http://evil.net/x" + q}, []string{"api.example.com"}},
		{"forbidden literal", Request{Method: "GET", URL: "http://169.254.169.254/x" + q}, []string{"*"}},
		{"forbidden resolved", Request{Method: "GET", URL: "http://internal.example.com/x" + q}, []string{"*"}},
		{"dns failure", Request{Method: "GET", URL: "http://nx.example.com/x" + q}, []string{"*"}},
		{"connection refused", Request{Method: "GET", URL: fmt.Sprintf("http://127.0.0.1:%d/x%s", closedPort, q)}, []string{"*"}},
		{"timeout", Request{Method: "GET", URL: slow.URL + "/x" + q, Timeout: 50 * time.Millisecond}, []string{"*"}},
		{"too large", Request{Method: "GET", URL: big.URL + "/x" + q}, []string{"*"}},
		{"redirect then dns failure", Request{Method: "GET", URL: redir.URL + "/x" + q}, []string{"*"}},
		{"redirect forbidden domain", Request{Method: "GET", URL: fmt.Sprintf("http://api.example.com:%d/x%s", serverPort(redir), q)}, []string{"api.example.com"}},
		{"malformed response", Request{Method: "GET", URL: "http://" + garbage.Addr().String() + "/x" + q}, []string{"*"}},
		{"userinfo", Request{Method: "GET", URL: "http://admin:" + passSecret + "@api.example.com/x" + q}, []string{"*"}},
		{"unparseable url", Request{Method: "GET", URL: "http://[api.example.com/x" + q}, []string{"*"}},
		{"bad header value", Request{Method: "GET", URL: "http://api.example.com/x" + q, Headers: map[string]string{"X-Bad": headerSecret + "\r\nX: y"}}, []string{"*"}},
		{"bad method", Request{Method: "DELETE", URL: "http://api.example.com/x" + q}, []string{"*"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			if req.Headers == nil {
				req.Headers = headers
			}
			req.AllowedDomains = tc.allowed
			_, err := c.Do(context.Background(), req)
			require.Error(t, err)
			var e *Error
			require.True(t, errors.As(err, &e))
			msg := err.Error()
			t.Log(msg)
			for _, s := range []string{querySecret, headerSecret, cookieSecret, passSecret, "token=", "admin:"} {
				require.NotContains(t, msg, s)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Kind: KindForbiddenDomain, Host: "evil.net", Msg: "host is not allowed"}
	require.Equal(t, "egress: forbidden_domain (host evil.net): host is not allowed", e.Error())
	require.Equal(t, "egress: timeout", (&Error{Kind: KindTimeout}).Error())
}

func TestNoProxyFromEnvironment(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	c := New(Options{})
	require.Nil(t, c.transport.Proxy)
}

// ---------------------------------------------------------------------------------------------
// benchmark

func BenchmarkGet(b *testing.B) {
	srv, _ := newServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	c, _ := newClient(b, Options{AllowLoopback: true})
	req := Request{Method: "GET", URL: srv.URL + "/bench", AllowedDomains: []string{"*"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Do(ctx, req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%v %d", err, resp.StatusCode)
		}
	}
}

func TestClassifyRedactsUnderlyingErrors(t *testing.T) {
	var sec secrets
	u, err := neturl.Parse("http://api.example.com/x?token=s3cret-value&k=val%20ue")
	require.NoError(t, err)
	addURLSecrets(&sec, u)
	sec.add("Bearer hunter2-secret")
	sec.add("ab") // too short to be treated as a secret
	inner := errors.New(`boom at http://api.example.com/x?token=s3cret-value&k=val%20ue (s3cret-value, val ue, "Bearer hunter2-secret") ab`)
	wrapped := &neturl.Error{Op: "Get", URL: u.String(), Err: inner}
	e := New(Options{}).classify(context.Background(), context.Background(), wrapped, "api.example.com", time.Second, &sec)
	require.Equal(t, KindTransport, e.Kind)
	require.NotContains(t, e.Error(), "s3cret")
	require.NotContains(t, e.Error(), "hunter2")
	require.NotContains(t, e.Error(), "val ue")
	require.NotContains(t, e.Error(), "Get \"http", "the url.Error wrapper (with the full URL) is dropped")
	require.Contains(t, e.Error(), " ab")
}

func TestHTTPSWithHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "%s %s", r.Proto, r.TLS.ServerName)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted-client handshake failure below
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c, dials := newClient(t, Options{AllowLoopback: true, LookupIP: fakeLookup(map[string][]string{
		"example.com": {"127.0.0.1"},
	})})
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c.transport.TLSClientConfig.RootCAs = pool

	url := fmt.Sprintf("https://example.com:%d/", serverPort(srv))
	for i := 0; i < 3; i++ {
		resp, err := c.Do(context.Background(), Request{Method: "GET", URL: url, AllowedDomains: []string{"example.com"}})
		require.NoError(t, err)
		require.Equal(t, "HTTP/2.0 example.com", string(resp.Body))
	}
	require.Equal(t, int32(1), dials.Load(), "one multiplexed connection")

	// An untrusted certificate is a transport error.
	untrusted, _ := newClient(t, Options{AllowLoopback: true})
	_, err := untrusted.Do(context.Background(), Request{Method: "GET", URL: srv.URL, AllowedDomains: []string{"*"}})
	requireKind(t, err, KindTransport)
}
