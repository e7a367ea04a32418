package egress

import (
	"sort"
	"strings"
)

// Kind classifies an egress failure.
type Kind string

// Failure kinds reported in Error.Kind.
const (
	// KindBadRequest: the request itself is invalid (method, URL, scheme, userinfo, headers, body
	// on GET, negative timeout).
	KindBadRequest Kind = "bad_request"
	// KindForbiddenDomain: the host (of the request or of a redirect) is not in the allowlist.
	KindForbiddenDomain Kind = "forbidden_domain"
	// KindForbiddenAddress: the host is or resolves to an address that may not be dialed
	// (loopback, private, link-local, metadata, ...). No connection was attempted.
	KindForbiddenAddress Kind = "forbidden_address"
	// KindTimeout: the request timeout or the caller's context deadline expired.
	KindTimeout Kind = "timeout"
	// KindTransport: DNS, connection, TLS or protocol failure, an invalid redirect, or too many
	// redirects.
	KindTransport Kind = "transport"
	// KindTooLarge: the response body exceeds Options.MaxResponseBytes or the request body
	// exceeds Options.MaxRequestBytes.
	KindTooLarge Kind = "too_large"
	// KindCanceled: the caller's context was canceled.
	KindCanceled Kind = "canceled"
	// KindSecret: a header refers to a secret that is not defined, may not be sent to the host,
	// or cannot be opened on this server. The message names the secret and the host, never a value.
	KindSecret Kind = "secret"
)

// Error is the error returned by Client.Do. Its text never contains URL userinfo, query strings
// or header values, so it may be shown to tenants and written to logs.
type Error struct {
	// Kind classifies the failure.
	Kind Kind
	// Host is the host name (no port) the failure relates to, or "" when unknown.
	Host string
	// Secret names the secret a KindSecret failure (or a failure to read one) is about.
	Secret string
	// Msg is a human-readable description free of secrets.
	Msg string
}

// Error renders "egress: <kind> (host <host>): <msg>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("egress: ")
	b.WriteString(string(e.Kind))
	if e.Host != "" {
		b.WriteString(" (host ")
		b.WriteString(e.Host)
		b.WriteString(")")
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	return b.String()
}

// minSecretLen is the shortest header/query value that is redacted from error text; shorter
// values ("1", "no") would only garble messages and are not credentials.
const minSecretLen = 4

// secrets collects strings that must never appear in error text.
type secrets struct{ list []string }

func (s *secrets) add(v string) {
	if len(v) >= minSecretLen {
		s.list = append(s.list, v)
	}
}

// redact replaces every known secret in msg, longest first.
func (s *secrets) redact(msg string) string {
	if len(s.list) == 0 {
		return msg
	}
	sort.Slice(s.list, func(i, j int) bool { return len(s.list[i]) > len(s.list[j]) })
	for _, v := range s.list {
		msg = strings.ReplaceAll(msg, v, "[redacted]")
	}
	return msg
}
