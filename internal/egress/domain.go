package egress

import (
	"net/netip"
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
//   - "*", matching any host, including IP literals.
//
// An empty list allows nothing. IP-literal hosts are allowed only through "*". Entries of any
// other shape (ports, embedded wildcards, "*.") never match. Being allowed here does not bypass
// the address rules that Client applies to the addresses actually dialed.
func DomainAllowed(host string, allowed []string) bool {
	h := normalizeHost(host)
	if h == "" {
		return false
	}
	_, ipErr := netip.ParseAddr(h)
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
		if isIP || e == "" || e == "*" { // "*." is malformed, not "*"
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
	last := labels[len(labels)-1]
	allDigits := true
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			allDigits = false
			break
		}
	}
	return !allDigits
}
