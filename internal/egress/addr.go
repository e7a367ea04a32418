package egress

import (
	"net/netip"
)

// blockedRange is an address block that outbound requests may never reach.
type blockedRange struct {
	prefix netip.Prefix
	reason string
}

func mustPrefixes(rs []struct{ cidr, reason string }) []blockedRange {
	out := make([]blockedRange, 0, len(rs))
	for _, r := range rs {
		out = append(out, blockedRange{prefix: netip.MustParsePrefix(r.cidr), reason: r.reason})
	}
	return out
}

// blockedV4 lists the IANA special-purpose IPv4 blocks (RFC 6890 and successors) that are not
// globally reachable, plus multicast and the reserved class E space. More specific entries come
// first so that the reported reason is the most precise one.
var blockedV4 = mustPrefixes([]struct{ cidr, reason string }{
	{"0.0.0.0/32", "unspecified address"},
	{"255.255.255.255/32", "broadcast address"},
	{"0.0.0.0/8", "\"this network\" address (0.0.0.0/8)"},
	{"10.0.0.0/8", "private address (10.0.0.0/8)"},
	{"100.64.0.0/10", "shared/CGNAT address (100.64.0.0/10)"},
	{"127.0.0.0/8", "loopback address"},
	{"169.254.0.0/16", "link-local address (169.254.0.0/16, includes cloud metadata endpoints)"},
	{"172.16.0.0/12", "private address (172.16.0.0/12)"},
	{"192.0.0.0/24", "IETF protocol assignment (192.0.0.0/24)"},
	{"192.0.2.0/24", "documentation address (192.0.2.0/24)"},
	{"192.88.99.0/24", "deprecated 6to4 relay anycast (192.88.99.0/24)"},
	{"192.168.0.0/16", "private address (192.168.0.0/16)"},
	{"198.18.0.0/15", "benchmarking address (198.18.0.0/15)"},
	{"198.51.100.0/24", "documentation address (198.51.100.0/24)"},
	{"203.0.113.0/24", "documentation address (203.0.113.0/24)"},
	{"224.0.0.0/4", "multicast address"},
	{"240.0.0.0/4", "reserved address (240.0.0.0/4)"},
})

// blockedV6 lists IPv6 blocks that are refused outright. Anything outside 2000::/3 (global
// unicast) is refused as well, except 64:ff9b::/96 whose embedded IPv4 address is checked.
var blockedV6 = mustPrefixes([]struct{ cidr, reason string }{
	{"::/128", "unspecified address"},
	{"::1/128", "loopback address"},
	{"::/96", "IPv4-compatible IPv6 address (deprecated)"},
	{"64:ff9b:1::/48", "local-use NAT64 address (64:ff9b:1::/48)"},
	{"100::/64", "discard-only address (100::/64)"},
	{"fc00::/7", "private (unique local) address (fc00::/7)"},
	{"fe80::/10", "link-local address (fe80::/10)"},
	{"fec0::/10", "site-local address (fec0::/10)"},
	{"ff00::/8", "multicast address"},
	{"2001::/23", "IETF protocol assignment (2001::/23, includes Teredo and benchmarking)"},
	{"2001:db8::/32", "documentation address (2001:db8::/32)"},
	{"3fff::/20", "documentation address (3fff::/20)"},
	{"5f00::/16", "segment routing SID (5f00::/16)"},
})

var (
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
	nat64WKP        = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour       = netip.MustParsePrefix("2002::/16")
	loopbackV4      = netip.MustParsePrefix("127.0.0.0/8")
)

// addrReason returns why a may not be dialed, or "" when it may. allowLoopback permits exactly
// 127.0.0.0/8 (plain IPv4) and ::1; every other rule still applies.
func addrReason(a netip.Addr, allowLoopback bool) string {
	if allowLoopback && a.Zone() == "" && (a.Is4() && loopbackV4.Contains(a) || a == netip.IPv6Loopback()) {
		return ""
	}
	return blockedReason(a)
}

// blockedReason applies the address rules without any test exemption.
func blockedReason(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid address"
	}
	if a.Zone() != "" {
		return "scoped (zoned) IPv6 address"
	}
	if a.Is4() {
		for _, r := range blockedV4 {
			if r.prefix.Contains(a) {
				return r.reason
			}
		}
		return ""
	}
	if a.Is4In6() {
		if r := blockedReason(a.Unmap()); r != "" {
			return r + " in IPv4-mapped IPv6 form"
		}
		return ""
	}
	for _, r := range blockedV6 {
		if r.prefix.Contains(a) {
			return r.reason
		}
	}
	b := a.As16()
	switch {
	case nat64WKP.Contains(a):
		// NAT64 well-known prefix: the gateway would forward to the embedded IPv4 address.
		if r := blockedReason(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); r != "" {
			return r + " in NAT64 form"
		}
		return ""
	case sixToFour.Contains(a):
		// 6to4: bits 16..47 carry the IPv4 address of the tunnel end point.
		if r := blockedReason(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})); r != "" {
			return r + " in 6to4 form"
		}
		return ""
	case !globalUnicastV6.Contains(a):
		return "IPv6 address outside global unicast space"
	}
	return ""
}
