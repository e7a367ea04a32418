package oidcauth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// PublicClient returns an HTTP client that connects to public addresses only: loopback, private,
// link-local (cloud metadata), multicast and unspecified addresses are refused at dial time, after
// name resolution, so a DNS name cannot smuggle one in. Tenant-owned issuers are fetched with it.
func PublicClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: refusePrivate}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = d.DialContext
	t.Proxy = nil
	return &http.Client{Transport: t, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func refusePrivate(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("identity provider address %q: %w", address, err)
	}
	ip := ap.Addr().Unmap()
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
		return fmt.Errorf("identity provider address %s is not public", ip)
	}
	return nil
}
