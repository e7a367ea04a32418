// Package egress is Lark's outbound HTTP layer behind the Starlark helpers r_http_get_v1 and
// r_http_post_v1. It makes server-side request forgery impossible and never leaks credentials:
//
//   - only http and https URLs with a host and without userinfo are accepted;
//   - the host of the request and of every redirect hop must be in the tenant's allowlist
//     (see DomainAllowed);
//   - every address a host resolves to is checked before dialing, the checked address itself is
//     dialed (no second resolution, so DNS rebinding cannot slip through), and the socket is
//     checked again in net.Dialer.Control; loopback, private, link-local (cloud metadata),
//     CGNAT, multicast, reserved, documentation and benchmarking ranges, and their
//     IPv4-mapped/compatible/NAT64/6to4 IPv6 forms, are refused;
//   - proxies from the environment are ignored, redirects are followed manually with all checks
//     repeated at every hop, and Authorization/Cookie are dropped once a redirect leaves the
//     original origin;
//   - request and response sizes and the request duration are bounded;
//   - error text never contains userinfo, query strings or header values.
package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/larkrun/lark/internal/tracing"
)

// Defaults applied by New to zero-valued Options fields.
const (
	// DefaultTimeout is the default Options.DefaultTimeout.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxTimeout is the default Options.MaxTimeout.
	DefaultMaxTimeout = 5 * time.Minute
	// DefaultMaxResponseBytes is the default Options.MaxResponseBytes (10 MiB).
	DefaultMaxResponseBytes = 10 << 20
	// DefaultMaxRequestBytes is the default Options.MaxRequestBytes (10 MiB).
	DefaultMaxRequestBytes = 10 << 20
	// DefaultMaxRedirects is the default Options.MaxRedirects.
	DefaultMaxRedirects = 5
)

// userAgent is sent when the request does not set User-Agent.
const userAgent = "lark-egress/1"

// redirectDrainBytes is how much of a redirect response body is read (to allow connection reuse)
// before it is closed.
const redirectDrainBytes = 64 << 10

// Options configures a Client. Zero values select the documented defaults.
type Options struct {
	// DefaultTimeout is used when Request.Timeout is 0 (default 30 s).
	DefaultTimeout time.Duration
	// MaxTimeout is the upper bound for Request.Timeout (default 5 min); longer timeouts are
	// reduced to it.
	MaxTimeout time.Duration
	// MaxResponseBytes bounds the response body (default 10 MiB); a larger body is an error
	// of kind KindTooLarge.
	MaxResponseBytes int64
	// MaxRequestBytes bounds Request.Body (default 10 MiB); a larger body is an error of kind
	// KindTooLarge.
	MaxRequestBytes int64
	// MaxRedirects is the number of redirects followed (default 5); every hop is re-checked.
	// A negative value follows none. A redirect beyond the limit is a KindTransport error.
	MaxRedirects int
	// AllowLoopback is a TEST-ONLY switch that permits 127.0.0.0/8 and ::1 (for httptest
	// servers); everything else stays blocked. Never set it in production.
	AllowLoopback bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver *net.Resolver
	// LookupIP, when set, replaces Resolver for host-name resolution (tests use it to map names
	// to chosen addresses). Its results go through the same address rules.
	LookupIP func(ctx context.Context, host string) ([]net.IP, error)
	// Transport, when set, carries every request instead of the network: the dialer and its
	// resolved-address checks are skipped, every other rule (URL shape, allowlist, IP literals,
	// headers, secrets, redirects, sizes, timeouts) still applies. `lark test` stubs upstreams
	// with it; a server never sets it.
	Transport http.RoundTripper
}

// Client performs outbound requests under the egress rules. It is safe for concurrent use and
// shares one http.Transport (with keep-alive) among all requests.
type Client struct {
	opts      Options
	transport *http.Transport
	hc        *http.Client
	// dial connects to an already checked "ip:port"; replaceable in tests to observe attempts.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// New returns a Client for o, filling in defaults.
func New(o Options) *Client {
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultTimeout
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	if o.DefaultTimeout > o.MaxTimeout {
		o.DefaultTimeout = o.MaxTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	switch {
	case o.MaxRedirects == 0:
		o.MaxRedirects = DefaultMaxRedirects
	case o.MaxRedirects < 0:
		o.MaxRedirects = 0
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	c := &Client{opts: o}
	d := &net.Dialer{KeepAlive: 30 * time.Second, Control: c.control}
	c.dial = d.DialContext
	c.transport = &http.Transport{
		Proxy:                  nil, // never from the environment
		DialContext:            c.dialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
	var rt http.RoundTripper = c.transport
	if o.Transport != nil {
		rt = o.Transport
	}
	c.hc = &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// CloseIdleConnections closes idle keep-alive connections of the shared transport.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// Request is one outbound request.
type Request struct {
	// Method is GET or POST (exact, upper case); anything else is KindBadRequest.
	Method string
	// URL is an absolute http or https URL with a host and without userinfo.
	URL string
	// Headers are sent as given (names are canonicalized). Hop-by-hop and framing headers
	// (Host, Content-Length, Transfer-Encoding, Connection, Keep-Alive, Proxy-*, TE, Trailer,
	// Upgrade) are refused. Authorization and Cookie are dropped once a redirect leaves the
	// original scheme://host:port.
	Headers map[string]string
	// Body is the POST body (at most Options.MaxRequestBytes); GET requests must not have one.
	Body []byte
	// Timeout bounds the whole exchange including redirects and reading the body; 0 selects
	// Options.DefaultTimeout and larger values than Options.MaxTimeout are reduced to it.
	// The caller's context deadline applies too, whichever is earlier.
	Timeout time.Duration
	// AllowedDomains is the tenant policy's allowed_outbound_domains (see DomainAllowed).
	AllowedDomains []string
	// Secrets resolves the {{secret:NAME}} references in header values (SecretPattern) for the
	// request's tenant; nil refuses a request that has any. A value is substituted only on the
	// hops whose host its secret's allowed_hosts match (a redirect elsewhere drops the header), and
	// is replaced by Redacted in the response's headers and body.
	Secrets SecretResolver
}

// Response is the final (non-redirect) answer.
type Response struct {
	// StatusCode is the HTTP status of the final response.
	StatusCode int
	// Headers maps canonical header names to their first value.
	Headers map[string]string
	// Body is the complete response body (at most Options.MaxResponseBytes).
	Body []byte
	// Host is the host name (no port) actually contacted last, after redirects.
	Host string
	// Duration is the time from the start of Do until the body was read.
	Duration time.Duration
}

// Do performs req under the egress rules, following redirects. Every error is an *Error.
// Non-2xx statuses are not errors.
func (c *Client) Do(ctx context.Context, req Request) (Response, error) {
	start := time.Now()
	if ctx == nil {
		ctx = context.Background()
	}
	var sec secrets
	u, hdr, err := c.prepare(req, &sec)
	if err != nil {
		return Response{}, err
	}
	if err := ctx.Err(); err != nil {
		return Response{}, ctxError(err, normalizeHost(u.Hostname()))
	}

	timeout := c.timeoutFor(req.Timeout)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out, err := c.follow(ctx, rctx, req, u, hdr, timeout, &sec)
	if err != nil {
		return Response{}, err
	}
	out.Duration = time.Since(start)
	return out, nil
}

// timeoutFor is the bound of one exchange: t, Options.DefaultTimeout when t is 0, at most
// Options.MaxTimeout.
func (c *Client) timeoutFor(t time.Duration) time.Duration {
	if t == 0 {
		t = c.opts.DefaultTimeout
	}
	if t > c.opts.MaxTimeout {
		t = c.opts.MaxTimeout
	}
	return t
}

// follow makes the request from u (prepared by prepare), hop by hop, until an answer that is not
// a redirect, and reads it. Every hop is checked (checkTarget) before it is made; secrets are
// opened after the first hop's check, and scrubbed from the answer. rctx bounds the exchange
// (timeout); ctx is the caller's.
func (c *Client) follow(ctx, rctx context.Context, req Request, u *url.URL, hdr http.Header, timeout time.Duration, sec *secrets) (Response, error) {
	var sh *secretHeaders
	var err error
	method := req.Method
	body := req.Body
	origin := originOf(u)
	for hop := 0; ; hop++ {
		host := normalizeHost(u.Hostname())
		if err := c.checkTarget(u, req.AllowedDomains, hop); err != nil {
			return Response{}, err
		}
		if hop == 0 {
			// Secrets are opened only for a request that may be made at all.
			if sh, err = resolveSecrets(ctx, hdr, req.Secrets, host, sec); err != nil {
				return Response{}, err
			}
		}
		hreq, err := hopRequest(ctx, rctx, method, u, body, hdr, sh, host, hop)
		if err != nil {
			return Response{}, err
		}

		resp, err := c.hc.Do(hreq)
		if err != nil {
			return Response{}, c.classify(ctx, rctx, err, host, timeout, sec)
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" {
			out, err := c.readResponse(ctx, rctx, resp, host, timeout, sec)
			if err != nil {
				return Response{}, err
			}
			sh.scrub(&out)
			return out, nil
		}

		// A redirect: release the connection, then validate the next hop.
		next, err := c.nextHop(resp, u, loc, host, hop, sec)
		if err != nil {
			return Response{}, err
		}
		origin = dropCredentials(hdr, next, origin)
		method, body = redirectMethod(resp.StatusCode, method, body, hdr)
		u = next
	}
}

// hopRequest builds one hop's request: the body for a POST, the URL re-checked as net/http will
// send it, the headers with the secrets this host may receive substituted (sh, see substitute)
// and the caller's trace context.
func hopRequest(ctx, rctx context.Context, method string, u *url.URL, body []byte, hdr http.Header, sh *secretHeaders, host string, hop int) (*http.Request, error) {
	var rd io.Reader = http.NoBody
	if method == http.MethodPost {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(rctx, method, u.String(), rd)
	if err != nil {
		return nil, &Error{Kind: KindBadRequest, Host: host, Msg: "cannot build request"}
	}
	// Re-check what net/http will actually use, in case re-serialization changed anything.
	if normalizeHost(hreq.URL.Hostname()) != host || hreq.URL.User != nil {
		return nil, &Error{Kind: KindBadRequest, Host: host, Msg: "URL does not round-trip"}
	}
	hreq.Header = hdr.Clone()
	if err := sh.substitute(hdr, hreq.Header, host, hop); err != nil {
		return nil, err
	}
	// The W3C trace context of the calling span (the r_http_* call's), replacing any the
	// caller set: the service called continues the invocation's trace.
	tracing.Inject(ctx, hreq.Header)
	return hreq, nil
}

// nextHop releases a redirect's connection (its body drained up to redirectDrainBytes) and
// returns the URL it points to, without fragment, its secrets noted in sec. A redirect beyond
// Options.MaxRedirects or with an invalid Location is an error; the caller checks the URL itself
// (checkTarget) before the hop is made.
func (c *Client) nextHop(resp *http.Response, u *url.URL, loc, host string, hop int, sec *secrets) (*url.URL, error) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, redirectDrainBytes))
	_ = resp.Body.Close()
	if hop >= c.opts.MaxRedirects {
		return nil, &Error{Kind: KindTransport, Host: host,
			Msg: fmt.Sprintf("stopped after %d redirects", c.opts.MaxRedirects)}
	}
	next, err := u.Parse(loc)
	if err != nil {
		return nil, &Error{Kind: KindTransport, Host: host, Msg: "redirect with an invalid Location"}
	}
	next.Fragment, next.RawFragment = "", ""
	addURLSecrets(sec, next)
	return next, nil
}

// dropCredentials deletes Authorization and Cookie from hdr when next leaves origin, and returns
// the origin the rest of the chain is compared with.
func dropCredentials(hdr http.Header, next *url.URL, origin string) string {
	if o := originOf(next); o != origin {
		hdr.Del("Authorization")
		hdr.Del("Cookie")
		origin = o // once stripped, credentials stay stripped for the rest of the chain
	}
	return origin
}

// redirectMethod is the method and body of the hop after a redirect with status: 301, 302 and
// 303 turn a POST into a GET without body (Content-Type deleted from hdr); the rest keep both.
func redirectMethod(status int, method string, body []byte, hdr http.Header) (string, []byte) {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		if method == http.MethodPost {
			method = http.MethodGet
			body = nil
			hdr.Del("Content-Type")
		}
	}
	return method, body
}

// prepare validates req and returns the parsed URL and the header set.
func (c *Client) prepare(req Request, sec *secrets) (*url.URL, http.Header, error) {
	for _, v := range req.Headers {
		sec.add(v)
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		// url.Error text contains the whole URL: never include it.
		return nil, nil, &Error{Kind: KindBadRequest, Msg: "invalid URL"}
	}
	addURLSecrets(sec, u)
	host := normalizeHost(u.Hostname())
	if u.User != nil {
		return nil, nil, &Error{Kind: KindBadRequest, Host: host,
			Msg: "URL must not contain userinfo; pass credentials in headers"}
	}
	if err := checkURLShape(u); err != "" {
		return nil, nil, &Error{Kind: KindBadRequest, Host: host, Msg: err}
	}
	switch req.Method {
	case http.MethodGet:
		if len(req.Body) > 0 {
			return nil, nil, &Error{Kind: KindBadRequest, Host: host, Msg: "GET request must not have a body"}
		}
	case http.MethodPost:
		if int64(len(req.Body)) > c.opts.MaxRequestBytes {
			return nil, nil, &Error{Kind: KindTooLarge, Host: host,
				Msg: fmt.Sprintf("request body exceeds %d bytes", c.opts.MaxRequestBytes)}
		}
	default:
		return nil, nil, &Error{Kind: KindBadRequest, Host: host, Msg: "method must be GET or POST"}
	}
	if req.Timeout < 0 {
		return nil, nil, &Error{Kind: KindBadRequest, Host: host, Msg: "timeout must not be negative"}
	}
	hdr := make(http.Header, len(req.Headers)+1)
	for k, v := range req.Headers {
		if !validHeaderName(k) {
			// The name is not echoed: a malformed name may be a whole "Name: value" line.
			return nil, nil, &Error{Kind: KindBadRequest, Host: host, Msg: "invalid header name"}
		}
		ck := http.CanonicalHeaderKey(k)
		if forbiddenHeader(ck) {
			return nil, nil, &Error{Kind: KindBadRequest, Host: host, Msg: fmt.Sprintf("header %q may not be set", ck)}
		}
		if !validHeaderValue(v) {
			return nil, nil, &Error{Kind: KindBadRequest, Host: host, Msg: fmt.Sprintf("invalid value for header %q", ck)}
		}
		if _, dup := hdr[ck]; dup {
			return nil, nil, &Error{Kind: KindBadRequest, Host: host, Msg: fmt.Sprintf("header %q given more than once", ck)}
		}
		hdr[ck] = []string{v}
	}
	if _, ok := hdr["User-Agent"]; !ok {
		hdr.Set("User-Agent", userAgent)
	}
	return u, hdr, nil
}

// checkURLShape validates scheme, host and port; it returns a reason or "".
func checkURLShape(u *url.URL) string {
	if u.Scheme != "http" && u.Scheme != "https" {
		return "scheme must be http or https"
	}
	if u.Opaque != "" || u.Host == "" {
		return "URL must have a host"
	}
	if u.User != nil {
		return "URL must not contain userinfo"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return "invalid port"
		}
	}
	h := normalizeHost(u.Hostname())
	if h == "" {
		return "URL must have a host"
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "IPv6 zones are not allowed"
		}
		return ""
	}
	if strings.HasPrefix(u.Host, "[") {
		return "invalid IPv6 literal"
	}
	if !validHostName(h) {
		return "invalid host name (ASCII letters, digits, '-', '_' and '.' only; use punycode for IDNs)"
	}
	return ""
}

// checkTarget applies the URL, allowlist and IP-literal address rules to one hop.
func (c *Client) checkTarget(u *url.URL, allowed []string, hop int) error {
	host := normalizeHost(u.Hostname())
	if reason := checkURLShape(u); reason != "" {
		if hop == 0 {
			return &Error{Kind: KindBadRequest, Host: host, Msg: reason}
		}
		return &Error{Kind: KindTransport, Host: host, Msg: "refused redirect: " + reason}
	}
	if !DomainAllowed(host, allowed) {
		msg := "host is not in allowed_outbound_domains"
		if hop > 0 {
			msg = "redirect to a host that is not in allowed_outbound_domains"
		}
		return &Error{Kind: KindForbiddenDomain, Host: host, Msg: msg}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if reason := addrReason(a, c.opts.AllowLoopback); reason != "" {
			return &Error{Kind: KindForbiddenAddress, Host: host, Msg: reason}
		}
	}
	return nil
}

// dialContext is the transport's dialer: it resolves the host, refuses the connection if any
// candidate address is forbidden, and dials the checked addresses themselves.
func (c *Client) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	h, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &Error{Kind: KindTransport, Msg: "invalid dial address"}
	}
	host := normalizeHost(h)
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, &Error{Kind: KindTransport, Host: host, Msg: "invalid port"}
	}
	addrs, err := c.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &Error{Kind: KindTransport, Host: host, Msg: "host has no addresses"}
	}
	_, literalErr := netip.ParseAddr(host)
	for _, a := range addrs {
		if reason := addrReason(a, c.opts.AllowLoopback); reason != "" {
			if literalErr != nil {
				reason = "host resolves to a forbidden address: " + reason
			}
			return nil, &Error{Kind: KindForbiddenAddress, Host: host, Msg: reason}
		}
	}
	var candidates []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if (network == "tcp4" && !a.Is4()) || (network == "tcp6" && !a.Is6()) {
			continue
		}
		candidates = append(candidates, a)
	}
	if len(candidates) == 0 {
		return nil, &Error{Kind: KindTransport, Host: host, Msg: "no address of the required family"}
	}
	var lastErr error
	for i, a := range candidates {
		dctx, cancel := partialDeadline(ctx, len(candidates)-i)
		conn, err := c.dial(dctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		cancel()
		if err == nil {
			return conn, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// partialDeadline gives one of n remaining dial attempts its share of ctx's time (at least 2 s
// when available), like the standard library dialer does.
func partialDeadline(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || n <= 1 {
		return ctx, func() {}
	}
	remaining := time.Until(deadline)
	share := remaining / time.Duration(n)
	if share < 2*time.Second {
		share = min(2*time.Second, remaining)
	}
	return context.WithTimeout(ctx, share)
}

// lookup resolves host (an IP literal resolves to itself).
func (c *Client) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if c.opts.LookupIP != nil {
		ips, err := c.opts.LookupIP(ctx, host)
		if err != nil {
			return nil, err
		}
		out := make([]netip.Addr, 0, len(ips))
		for _, ip := range ips {
			var a netip.Addr
			if v4 := ip.To4(); v4 != nil {
				a = netip.AddrFrom4([4]byte(v4))
			} else if len(ip) == net.IPv6len {
				a = netip.AddrFrom16([16]byte(ip))
			}
			out = append(out, a) // an invalid Addr is refused by addrReason
		}
		return out, nil
	}
	return c.opts.Resolver.LookupNetIP(ctx, "ip", host)
}

// control re-checks the socket address just before connect(2): a second, independent barrier.
func (c *Client) control(network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return &Error{Kind: KindForbiddenAddress, Msg: "only TCP connections are allowed"}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Error{Kind: KindForbiddenAddress, Msg: "unparseable dial address"}
	}
	if reason := addrReason(ap.Addr(), c.opts.AllowLoopback); reason != "" {
		return &Error{Kind: KindForbiddenAddress, Host: ap.Addr().String(), Msg: reason}
	}
	return nil
}

// readResponse reads the final response body under the size cap.
func (c *Client) readResponse(parent, rctx context.Context, resp *http.Response, host string, timeout time.Duration, sec *secrets) (Response, error) {
	defer resp.Body.Close()
	limit := c.opts.MaxResponseBytes
	tooLarge := &Error{Kind: KindTooLarge, Host: host, Msg: fmt.Sprintf("response body exceeds %d bytes", limit)}
	if resp.ContentLength > limit {
		return Response{}, tooLarge
	}
	var buf bytes.Buffer
	if resp.ContentLength >= 0 {
		buf.Grow(int(resp.ContentLength) + 1)
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
		return Response{}, c.classify(parent, rctx, err, host, timeout, sec)
	}
	if int64(buf.Len()) > limit {
		return Response{}, tooLarge
	}
	headers := make(map[string]string, len(resp.Header))
	for k, vs := range resp.Header {
		if len(vs) > 0 {
			headers[http.CanonicalHeaderKey(k)] = vs[0]
		}
	}
	body := buf.Bytes()
	if body == nil {
		body = []byte{}
	}
	return Response{
		StatusCode: resp.StatusCode,
		Headers:    headers,
		Body:       body,
		Host:       host,
	}, nil
}

// classify turns a transport error into an *Error with secret-free text.
func (c *Client) classify(parent, rctx context.Context, err error, host string, timeout time.Duration, sec *secrets) *Error {
	var e *Error
	if errors.As(err, &e) && (e.Kind == KindForbiddenAddress || e.Kind == KindForbiddenDomain) {
		return &Error{Kind: e.Kind, Host: firstNonEmpty(e.Host, host), Msg: sec.redact(e.Msg)}
	}
	if perr := parent.Err(); perr != nil {
		return ctxError(perr, host)
	}
	if rctx.Err() != nil {
		return &Error{Kind: KindTimeout, Host: host, Msg: fmt.Sprintf("request timed out after %s", timeout)}
	}
	if e != nil {
		return &Error{Kind: e.Kind, Host: firstNonEmpty(e.Host, host), Msg: sec.redact(e.Msg)}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &Error{Kind: KindTimeout, Host: host, Msg: "request timed out"}
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Kind: KindCanceled, Host: host, Msg: "request canceled"}
	}
	// url.Error's text embeds the full URL (with its query): report only the inner error.
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	return &Error{Kind: KindTransport, Host: host, Msg: sec.redact(err.Error())}
}

// ctxError maps the caller's context error.
func ctxError(err error, host string) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Host: host, Msg: "context deadline exceeded"}
	}
	return &Error{Kind: KindCanceled, Host: host, Msg: "request canceled"}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// addURLSecrets records the userinfo, query and fragment of u (raw and decoded) for redaction.
func addURLSecrets(sec *secrets, u *url.URL) {
	if u.User != nil {
		sec.add(u.User.String())
		sec.add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			sec.add(p)
		}
	}
	sec.add(u.RawQuery)
	sec.add(u.Fragment)
	sec.add(u.RawFragment)
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		for _, vs := range q {
			for _, v := range vs {
				sec.add(v)
			}
		}
	}
	for _, part := range strings.Split(u.RawQuery, "&") {
		if _, v, ok := strings.Cut(part, "="); ok {
			sec.add(v)
		}
	}
}

// originOf is scheme://host:port with the default port made explicit.
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return u.Scheme + "://" + net.JoinHostPort(normalizeHost(u.Hostname()), port)
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// forbiddenHeader reports request headers a caller may not set: framing and hop-by-hop headers
// whose control belongs to the transport, and Host (virtual-host override).
func forbiddenHeader(canonical string) bool {
	switch canonical {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive",
		"Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Upgrade":
		return true
	}
	return false
}

// validHeaderName reports whether k is a non-empty RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue refuses control characters (except horizontal tab), so values cannot split
// headers.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
