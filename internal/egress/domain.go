package egress

import (
	"errors"
	"net/netip"
	"regexp"
	"strings"
)

// DomainAllowed reports whether host is permitted by the allowlist allowed (a tenant policy's
// allowed_outbound_domains).
//
// host is a bare host name or IP literal without a port; IPv6 literals may be bracketed.
// Comparison is case-insensitive and ignores one trailing dot. An entry is one of:
//
//   - a host name, matching that host exactly ("api.example.com");
//   - "*.example.com", matching every subdomain of example.com at any depth but not example.com
//     itself, and only at a label boundary ("evilexample.com" does not match);
//   - an IPv4 or IPv6 address ("93.184.216.34", "2606:4700::1111"), matching an IP-literal host
//     that is exactly that address (an IPv4-mapped IPv6 address is the IPv4 address);
//   - "*", matching any host, including IP literals.
//
// An empty list allows nothing. Entries of any other shape (ports, embedded wildcards, "*.",
// CIDR ranges) never match; ValidateEntry refuses them. Being allowed here does not bypass the
// address rules that Client applies to the addresses actually dialed: an allowed 127.0.0.1 is
// still refused as a loopback address.
func DomainAllowed(host string, allowed []string) bool {
	h := normalizeHost(host)
	if h == "" {
		return false
	}
	hostIP, ipErr := netip.ParseAddr(h)
	isIP := ipErr == nil
	if !isIP && !validHostName(h) {
		return false
	}
	for _, e := range allowed {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "*" {
			return true
		}
		e = strings.TrimSuffix(e, ".")
		if isIP {
			if a, err := netip.ParseAddr(e); err == nil && a.Zone() == "" && a.Unmap() == hostIP.Unmap() {
				return true
			}
			continue
		}
		if e == "" || e == "*" { // "*." is malformed, not "*"
			continue
		}
		if rest, ok := strings.CutPrefix(e, "*."); ok {
			if rest == "" || strings.Contains(rest, "*") {
				continue
			}
			suffix := "." + rest
			if len(h) > len(suffix) && strings.HasSuffix(h, suffix) {
				return true
			}
			continue
		}
		if e == h {
			return true
		}
	}
	return false
}

// hostNameRE is the shape of a host-name entry (after an optional "*."): lower-case LDH labels.
var hostNameRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidateEntry reports why e cannot be an entry of an allowlist (a tenant policy's
// allowed_outbound_domains), or nil when it can: "*"; a lower-case host name, optionally
// starting with "*."; or an IPv4 or IPv6 address without a zone, which matches exactly that
// address. CIDR ranges, ports, brackets and names whose last label is all digits ("1.2.3",
// which some resolvers read as an address) are refused.
func ValidateEntry(e string) error {
	if e == "*" {
		return nil
	}
	if strings.Contains(e, "/") {
		return errors.New("CIDR ranges are not supported: list each IP address")
	}
	if a, err := netip.ParseAddr(e); err == nil {
		if a.Zone() != "" {
			return errors.New("an IPv6 address with a zone is not supported")
		}
		return nil
	}
	h := strings.TrimPrefix(e, "*.")
	if len(h) > 253 || !hostNameRE.MatchString(h) || allDigits(h[strings.LastIndexByte(h, '.')+1:]) {
		return errors.New("must be a lower-case host name, optionally starting with '*.', an IPv4 or IPv6 address, or '*' for any public host")
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// normalizeHost lowercases host, strips IPv6 brackets and removes one trailing dot.
func normalizeHost(host string) string {
	h := strings.ToLower(strings.TrimSpace(host))
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSuffix(h, ".")
}

// validHostName reports whether h (already normalized) is a syntactically valid DNS host name:
// ASCII letters, digits, '-' and '_' in non-empty labels of at most 63 bytes, at most 253 bytes
// in total, and a final label that is not all digits (so that odd IPv4 spellings such as
// "2130706433" or "0x7f.1" that some resolvers interpret as addresses are refused).
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return !allDigits(labels[len(labels)-1])
}
