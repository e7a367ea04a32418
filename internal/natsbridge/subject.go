package natsbridge

import (
	"errors"
	"fmt"
	"strings"

	"github.com/larkrun/lark/internal/gts"
)

// chainToken is the subject token that stands for each "~" of a GTS id. A GTS name token is made of
// [a-z0-9_] and a token made only of underscores is reserved (only the single "_" namespace
// placeholder is allowed), so "__" never occurs in a valid id: the mapping is reversible, uses only
// the characters NATS recommends for subjects, and keeps every GTS token a subject token of its own,
// so wildcards work on the type hierarchy (all events derived from gts.x.core.faas.audit.v1~ are
// "<prefix>.<tenant>.gts.x.core.faas.audit.v1.__.>").
const chainToken = "__"

// Limits on what a subscription names (the server would refuse longer subjects or names anyway; a
// bound here makes the refusal ours and early).
const (
	// MaxSubjectLen bounds a subscription's filter subject and the configured prefix, in bytes.
	MaxSubjectLen = 512
	// MaxNameLen bounds a durable consumer name and a stream name.
	MaxNameLen = 64
)

// ErrInvalidSubject is returned for a subject or prefix that is not a valid NATS subject or filter.
var ErrInvalidSubject = errors.New("natsbridge: invalid subject")

// ErrInvalidName is returned for a stream or durable consumer name outside [A-Za-z0-9_-]{1,64}.
var ErrInvalidName = errors.New("natsbridge: invalid name")

// EventSubject is the subject an event of tenant tenantID and GTS type typeID is mirrored to:
//
//	<prefix>.<tenant_id>.<type id with every "~" replaced by the token "__">
//
// For example the event type gts.x.shop.orders.placed.v1~ of tenant acme under the default prefix is
// mirrored to lark.events.acme.gts.x.shop.orders.placed.v1.__ and
// gts.x.core.faas.audit.v1~x.core.triggers.schedule_created.v1~ to
// lark.events.acme.gts.x.core.faas.audit.v1.__.x.core.triggers.schedule_created.v1.__ . The dots of
// the id stay token separators. An invalid tenant id or type id is an error (the store never holds
// one; the check keeps a malformed value from publishing to a wildcard or a foreign subject).
func EventSubject(prefix, tenantID, typeID string) (string, error) {
	if !safeToken(tenantID) {
		return "", fmt.Errorf("%w: tenant id %q is not a subject token", ErrInvalidSubject, tenantID)
	}
	if _, err := gts.Parse(typeID); err != nil {
		return "", fmt.Errorf("%w: event type: %w", ErrInvalidSubject, err)
	}
	// "~" ends a segment: "v1~x" becomes "v1.__.x" and a final "~" becomes ".__".
	var b strings.Builder
	b.Grow(len(prefix) + len(tenantID) + len(typeID) + 16)
	b.WriteString(prefix)
	b.WriteByte('.')
	b.WriteString(tenantID)
	b.WriteByte('.')
	for i := 0; i < len(typeID); i++ {
		if typeID[i] != '~' {
			b.WriteByte(typeID[i])
			continue
		}
		b.WriteByte('.')
		b.WriteString(chainToken)
		if i+1 < len(typeID) {
			b.WriteByte('.')
		}
	}
	return b.String(), nil
}

// ParseEventSubject reverses EventSubject: the tenant id and the GTS type id of a subject under
// prefix. It fails for a subject outside prefix or one that does not map back to a valid GTS id.
func ParseEventSubject(prefix, subject string) (tenantID, typeID string, err error) {
	rest, ok := strings.CutPrefix(subject, prefix+".")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not under %q", ErrInvalidSubject, subject, prefix)
	}
	tenantID, rest, ok = strings.Cut(rest, ".")
	if !ok || !safeToken(tenantID) {
		return "", "", fmt.Errorf("%w: %q has no tenant token", ErrInvalidSubject, subject)
	}
	tokens := strings.Split(rest, ".")
	var b strings.Builder
	b.Grow(len(rest))
	for i, tok := range tokens {
		if tok == chainToken {
			b.WriteByte('~')
			continue
		}
		if i > 0 && tokens[i-1] != chainToken {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	typeID = b.String()
	if _, err := gts.Parse(typeID); err != nil {
		return "", "", fmt.Errorf("%w: %q: %w", ErrInvalidSubject, subject, err)
	}
	return tenantID, typeID, nil
}

// safeToken reports whether s is one subject token of the characters NATS recommends
// ([A-Za-z0-9_-]), at most MaxNameLen bytes long.
func safeToken(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// validName checks a stream or durable consumer name.
func validName(what, s string) error {
	if !safeToken(s) {
		return fmt.Errorf("%w: %s %q must match [A-Za-z0-9_-]{1,%d}", ErrInvalidName, what, s, MaxNameLen)
	}
	return nil
}

// validSubject checks a subject (wildcards allowed when filter is true): at most MaxSubjectLen bytes,
// non-empty tokens of printable ASCII without whitespace, "*" only as a whole token and ">" only as
// the whole last token.
func validSubject(s string, filter bool) error {
	if s == "" || len(s) > MaxSubjectLen {
		return fmt.Errorf("%w: %q must be 1 to %d bytes", ErrInvalidSubject, s, MaxSubjectLen)
	}
	tokens := strings.Split(s, ".")
	for i, tok := range tokens {
		if tok == "" {
			return fmt.Errorf("%w: %q has an empty token", ErrInvalidSubject, s)
		}
		for j := 0; j < len(tok); j++ {
			if c := tok[j]; c <= ' ' || c >= 0x7f {
				return fmt.Errorf("%w: %q has a space or a non-printable byte", ErrInvalidSubject, s)
			}
		}
		wild := strings.ContainsAny(tok, "*>")
		switch {
		case !wild:
		case !filter:
			return fmt.Errorf("%w: %q has a wildcard", ErrInvalidSubject, s)
		case tok == "*":
		case tok == ">" && i == len(tokens)-1:
		default:
			return fmt.Errorf("%w: %q misplaces a wildcard", ErrInvalidSubject, s)
		}
	}
	return nil
}
