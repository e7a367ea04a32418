package gts

import "strings"

// patternKind selects the matching rule of a Pattern.
type patternKind uint8

const (
	patNone   patternKind = iota // zero Pattern: matches nothing
	patExact                     // full id whose last segment has a MINOR
	patMajor                     // full id whose last segment is major-only
	patPrefix                    // "P*"
	patMinor                     // "...name.vN.*"
)

// Pattern selects GTS identifiers. It is either a full identifier or a
// wildcard pattern "P*"; see [ParsePattern] for the matching rules. The zero
// Pattern matches nothing.
type Pattern struct {
	raw    string
	kind   patternKind
	exact  string // the identifier matched exactly, if any
	prefix string // the literal prefix of matching identifiers, if any
	isType bool   // patMajor: the pattern ends with '~'
}

// ParsePattern parses a pattern. Errors are of type *ParseError.
//
// A pattern is one of:
//
//   - A full identifier whose last segment has a MINOR version, with or
//     without a trailing "~". It matches only that exact identifier.
//   - A full identifier whose last segment is major-only, e.g.
//     "...calculate_tax.v1~". It matches the identifier itself and the same
//     identifier with any MINOR of that MAJOR in its last segment
//     ("...calculate_tax.v1.0~", "...calculate_tax.v1.7~"), but not
//     identifiers with further segments chained after it.
//   - A wildcard pattern "P*": exactly one "*", as the last character,
//     directly after "gts.", a "." or a "~", where P is a valid prefix of an
//     identifier. It matches every valid identifier starting with P. If P ends
//     with a MAJOR version and a dot ("...name.vN.*") it additionally matches
//     the major-only type identifier "...name.vN~".
//
// Patterns are at most [MaxLength] bytes long.
func ParsePattern(s string) (Pattern, error) {
	star := strings.IndexByte(s, '*')
	if len(s) > MaxLength {
		return Pattern{}, newParseError(s, MaxLength, msgTooLong, true)
	}
	if star < 0 {
		st, off, msg := scan(s, false, nil)
		if msg != "" {
			return Pattern{}, newParseError(s, off, msg, true)
		}
		if st.hasMinor {
			return Pattern{raw: s, kind: patExact, exact: s}, nil
		}
		isType := strings.HasSuffix(s, "~")
		return Pattern{raw: s, kind: patMajor, exact: s, prefix: s[:st.majEnd] + ".", isType: isType}, nil
	}
	if star != len(s)-1 {
		if next := strings.IndexByte(s[star+1:], '*'); next >= 0 {
			return Pattern{}, newParseError(s, star+1+next, `pattern must contain at most one "*"`, true)
		}
		return Pattern{}, newParseError(s, star, `"*" must be the last character`, true)
	}
	p := s[:star]
	if !strings.HasPrefix(p, idPrefix) {
		_, off, msg := scan(p, true, nil)
		return Pattern{}, newParseError(s, off, msg, true)
	}
	if c := p[len(p)-1]; c != '.' && c != '~' {
		return Pattern{}, newParseError(s, star, `"*" must directly follow "gts.", "." or "~"`, true)
	}
	st, off, msg := scan(p, true, nil)
	if msg != "" {
		return Pattern{}, newParseError(s, off, msg, true)
	}
	if st.minorEnd {
		return Pattern{raw: s, kind: patMinor, exact: p[:len(p)-1] + "~", prefix: p}, nil
	}
	return Pattern{raw: s, kind: patPrefix, prefix: p}, nil
}

// MustParsePattern is like ParsePattern but panics if s is not a valid
// pattern. It is meant for constants and tests.
func MustParsePattern(s string) Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern exactly as it was parsed.
func (p Pattern) String() string { return p.raw }

// Match reports whether the identifier id is selected by the pattern (see
// [ParsePattern]). An invalid identifier never matches. Match does not
// allocate.
func (p Pattern) Match(id string) bool {
	switch p.kind {
	case patExact:
		return id == p.exact
	case patMajor:
		if id == p.exact {
			return true
		}
		if len(id) > MaxLength || !strings.HasPrefix(id, p.prefix) {
			return false
		}
		// The rest must be exactly a MINOR, followed by '~' for types.
		rest := id[len(p.prefix):]
		if p.isType {
			var ok bool
			if rest, ok = strings.CutSuffix(rest, "~"); !ok {
				return false
			}
		}
		_, end, _, msg := scanNumber(rest, 0)
		return msg == "" && end == len(rest)
	case patPrefix:
		return strings.HasPrefix(id, p.prefix) && valid(id)
	case patMinor:
		return id == p.exact || (strings.HasPrefix(id, p.prefix) && valid(id))
	}
	return false
}

// Candidates describes the pattern for an index prefix scan, e.g. in SQL:
// an identifier is a candidate if it equals one of exact or starts with one
// of prefixes. The strings are literal; when used with SQL LIKE, escape "_"
// and "%" (identifiers contain "_").
//
// For every valid identifier id, Match(id) implies that id is a candidate.
// If [Pattern.Exact] reports true the converse holds too, so candidates need
// no further check. Otherwise (a major-only identifier pattern, whose prefix
// also covers identifiers with further chained segments) Candidates is only a
// superset suitable for an index prefix scan, and callers must confirm each
// candidate with Match.
//
// The zero Pattern has no candidates.
func (p Pattern) Candidates() (exact []string, prefixes []string) {
	if p.exact != "" {
		exact = []string{p.exact}
	}
	if p.prefix != "" {
		prefixes = []string{p.prefix}
	}
	return exact, prefixes
}

// Exact reports whether [Pattern.Candidates] selects exactly the identifiers
// that Match accepts, so that no confirmation with Match is needed. It is
// false only for major-only identifier patterns such as "...name.v1~".
func (p Pattern) Exact() bool { return p.kind != patMajor }
