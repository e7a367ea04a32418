// Package gts parses and validates GTS (Global Type System) identifiers and
// wildcard patterns.
//
// A GTS identifier looks like
//
//	gts.vendor.package.namespace.type.vMAJOR[.MINOR]~vendor.package.namespace.type.vMAJOR[.MINOR]~
//
// It starts with the prefix "gts." exactly once, followed by one or more
// segments chained by "~". Every segment consists of exactly four name tokens
// (vendor, package, namespace, type) matching [a-z_][a-z0-9_]* and a version
// "v" MAJOR ["." MINOR] written in decimal without leading zeros. A token made
// only of underscores is reserved: the single "_" is allowed as the namespace
// placeholder and nowhere else. An identifier ending with "~" names a type; any
// other identifier names an instance. Identifiers are at most [MaxLength]
// bytes long.
//
// The package is pure: it performs no I/O, and parsing does not use regular
// expressions. [Parse] allocates only the segment slice on success, and
// [Pattern.Match] does not allocate.
//
// See https://github.com/globaltypesystem/gts-spec for the specification.
package gts

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxLength is the maximum length of a GTS identifier or pattern, in bytes.
const MaxLength = 1024

// maxVersion is the largest accepted MAJOR or MINOR number.
const maxVersion = math.MaxInt32

// maxEchoedInput is how many bytes of the input a ParseError keeps.
const maxEchoedInput = 100

// idPrefix is the mandatory prefix of every identifier.
const idPrefix = "gts."

// minSegmentLen is the length of the shortest segment with its '~'.
const minSegmentLen = len("a.b.c.d.v0~")

// Segment is one element of a GTS identifier chain:
// vendor.package.namespace.type.vMAJOR[.MINOR].
type Segment struct {
	// Vendor is the first name token, the origin of the definition.
	Vendor string
	// Package is the second name token, the vendor's module or application.
	Package string
	// Namespace is the third name token; "_" is the placeholder for "none".
	Namespace string
	// Type is the fourth name token, the name of the type or instance.
	Type string
	// Major is the MAJOR version number.
	Major int
	// Minor is the MINOR version number; it is meaningful only if HasMinor.
	Minor int
	// HasMinor reports whether the version carries a MINOR component.
	HasMinor bool
}

// String returns the canonical text of the segment, without any "gts." prefix
// or "~" separator, e.g. "vendor.app.billing.calculate_tax.v1.2".
func (s Segment) String() string {
	b := make([]byte, 0, len(s.Vendor)+len(s.Package)+len(s.Namespace)+len(s.Type)+16)
	b = append(b, s.Vendor...)
	b = append(b, '.')
	b = append(b, s.Package...)
	b = append(b, '.')
	b = append(b, s.Namespace...)
	b = append(b, '.')
	b = append(b, s.Type...)
	b = append(b, ".v"...)
	b = strconv.AppendInt(b, int64(s.Major), 10)
	if s.HasMinor {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(s.Minor), 10)
	}
	return string(b)
}

// ID is a parsed, valid GTS identifier. The zero ID is empty and is not a valid
// identifier: its String is "" and it has no segments.
//
// ID values are not comparable with ==; compare their String values instead.
type ID struct {
	raw    string
	segs   []Segment
	famEnd int // offset of the '.' that precedes the last segment's version
	majEnd int // offset just past the last segment's MAJOR digits
}

// Parse parses and validates a GTS identifier. Errors are of type *ParseError.
func Parse(s string) (ID, error) {
	if len(s) > MaxLength {
		return ID{}, newParseError(s, MaxLength, msgTooLong, false)
	}
	// Every segment takes at least len("a.b.c.d.v0~") bytes; bound the
	// capacity so that junk input full of '~' cannot force a large allocation.
	n := min(strings.Count(s, "~")+1, len(s)/minSegmentLen+1)
	segs := make([]Segment, 0, n)
	st, off, msg := scan(s, false, &segs)
	if msg != "" {
		return ID{}, newParseError(s, off, msg, false)
	}
	return ID{raw: s, segs: segs, famEnd: st.famEnd, majEnd: st.majEnd}, nil
}

// MustParse is like Parse but panics if s is not a valid identifier. It is
// meant for constants and tests.
func MustParse(s string) ID {
	id, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return id
}

// valid reports whether s is a valid identifier without allocating.
func valid(s string) bool {
	_, _, msg := scan(s, false, nil)
	return msg == ""
}

// String returns the identifier exactly as it was parsed.
func (id ID) String() string { return id.raw }

// Segments returns a copy of the identifier's segments, left to right.
func (id ID) Segments() []Segment { return slices.Clone(id.segs) }

// Last returns the rightmost segment, or the zero Segment for the zero ID.
func (id ID) Last() Segment {
	if len(id.segs) == 0 {
		return Segment{}
	}
	return id.segs[len(id.segs)-1]
}

// IsType reports whether the identifier names a type, i.e. ends with "~".
// Identifiers that are not types are instance identifiers.
func (id ID) IsType() bool { return strings.HasSuffix(id.raw, "~") }

// MajorOnly reports whether the last segment's version has no MINOR component.
// It returns false for the zero ID.
func (id ID) MajorOnly() bool { return len(id.segs) > 0 && !id.Last().HasMinor }

// Family returns the identifier up to and including the last segment's type
// token, i.e. without the last version and trailing "~". For
// "gts.a.b.c.d.v1~vendor.app.billing.calculate_tax.v1.2~" it returns
// "gts.a.b.c.d.v1~vendor.app.billing.calculate_tax".
func (id ID) Family() string { return id.raw[:id.famEnd] }

// MajorID returns the identifier with the last segment's MINOR removed, e.g.
// "...calculate_tax.v1~" for "...calculate_tax.v1.2~". Type identifiers keep
// their trailing "~". A major-only identifier is returned unchanged.
func (id ID) MajorID() string {
	if !id.Last().HasMinor {
		return id.raw
	}
	if id.IsType() {
		return id.raw[:id.majEnd] + "~"
	}
	return id.raw[:id.majEnd]
}

// ParseError describes why a string is not a valid GTS identifier or pattern.
type ParseError struct {
	// Input is the rejected input, truncated to its first 100 bytes.
	Input string
	// Offset is the byte offset in the full input where the problem was found.
	Offset int
	// Msg describes the problem.
	Msg string

	pattern bool // the input was parsed as a pattern
}

// Error returns a message like
// "gts: invalid id at offset 12: token must be lowercase". It never contains
// the input itself.
func (e *ParseError) Error() string {
	what := "id"
	if e.pattern {
		what = "pattern"
	}
	return "gts: invalid " + what + " at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

func newParseError(s string, off int, msg string, pattern bool) *ParseError {
	if msg == msgInvalidChar && off < len(s) {
		if r, size := utf8.DecodeRuneInString(s[off:]); r == utf8.RuneError && size <= 1 {
			msg += ` '\x` + strconv.FormatUint(uint64(s[off]), 16) + `'`
		} else {
			msg += " " + strconv.QuoteRune(r)
		}
	}
	return &ParseError{Input: truncate(s, maxEchoedInput), Offset: off, Msg: msg, pattern: pattern}
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > n-utf8.UTFMax && i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// Error messages. They are constants so that validation does not allocate.
const (
	msgTooLong         = "longer than 1024 characters"
	msgPrefix          = `must start with "gts."`
	msgPrefixTwice     = `"gts." prefix may appear only once, at the start`
	msgNoSegment       = `missing segment after "gts."`
	msgEmptySegment    = `empty segment ("~~")`
	msgEmptyToken      = "empty token"
	msgDigitStart      = "token must not start with a digit"
	msgUppercase       = "token must be lowercase"
	msgInvalidChar     = "invalid character"
	msgStar            = `wildcard "*" is not allowed here`
	msgPlaceholder     = `underscore-only token is allowed only as the namespace placeholder "_"`
	msgIncomplete      = "incomplete segment; want vendor.package.namespace.type.vMAJOR[.MINOR]"
	msgTooFewTokens    = "segment has fewer than 4 name tokens before the version"
	msgTooManyTokens   = "segment has more than 4 name tokens before the version"
	msgMissingVersion  = "segment is missing its version vMAJOR[.MINOR]"
	msgExpectVersion   = `expected version "vMAJOR[.MINOR]"`
	msgVersionNumber   = "version number expected"
	msgLeadingZero     = "version number must not have leading zeros"
	msgVersionTooLarge = "version number too large"
	msgVersionParts    = "version has more than MAJOR and MINOR components"
	msgAfterVersion    = `unexpected character after version; want "~" or end of id`
)

// scanState is what scan learned about a valid (prefix of an) identifier.
type scanState struct {
	nseg     int  // number of complete segments
	famEnd   int  // offset of the '.' preceding the last complete segment's version
	majEnd   int  // offset just past the last complete segment's MAJOR digits
	hasMinor bool // the last complete segment has a MINOR
	minorEnd bool // partial mode: input ended right after "vMAJOR."
}

// scan validates s. In partial mode s only has to be a prefix of a valid
// identifier ending at a token boundary (after "gts.", '.' or '~'). Segments
// are appended to dst when it is non-nil. On failure msg is non-empty and off
// is the byte offset of the problem. scan never allocates unless dst needs to
// grow.
func scan(s string, partial bool, dst *[]Segment) (st scanState, off int, msg string) {
	if off, msg = scanPrefix(s); msg != "" {
		return st, off, msg
	}
	i := len(idPrefix)
	for {
		// At the start of a segment.
		if i == len(s) {
			if partial {
				return st, 0, ""
			}
			return st, i, msgNoSegment
		}
		if s[i] == '~' {
			return st, i, msgEmptySegment
		}
		var seg Segment
		var typeStart int
		if i, typeStart, msg = scanNames(s, i, partial, &seg); msg != "" {
			return st, i, msg
		}
		// The version.
		if i == len(s) {
			if partial {
				return st, 0, "" // the input ended after "type."
			}
			return st, i, msgMissingVersion
		}
		if c := s[i]; c != 'v' {
			off, msg = versionStartError(c, i, seg.Type, typeStart)
			return st, off, msg
		}
		famEnd := i - 1
		var majEnd int
		var minorEnd bool
		if i, majEnd, minorEnd, msg = scanVersion(s, i+1, partial, &seg); msg != "" {
			return st, i, msg
		}
		if minorEnd {
			st.minorEnd = true
			return st, 0, ""
		}
		st.nseg++
		st.famEnd, st.majEnd, st.hasMinor = famEnd, majEnd, seg.HasMinor
		if dst != nil {
			*dst = append(*dst, seg)
		}
		if i == len(s) {
			return st, 0, "" // instance identifier
		}
		i++ // '~'
		if i == len(s) {
			return st, 0, "" // type identifier
		}
	}
}

// scanPrefix checks the length limit and the "gts." prefix. On failure it
// returns the offset of the problem (for a wrong prefix, how far s matched it)
// and a message.
func scanPrefix(s string) (off int, msg string) {
	if len(s) > MaxLength {
		return MaxLength, msgTooLong
	}
	if !strings.HasPrefix(s, idPrefix) {
		n := 0
		for n < len(s) && n < len(idPrefix) && s[n] == idPrefix[n] {
			n++
		}
		return n, msgPrefix
	}
	return 0, ""
}

// scanNames scans the four name tokens of the segment starting at i into seg,
// each followed by a '.'. It returns the offset just past the last '.' and the
// offset of the type token. In partial mode it stops early, returning len(s),
// when the input ends after a '.'. On failure it returns the offset of the
// problem and a message.
func scanNames(s string, i int, partial bool, seg *Segment) (end, typeStart int, msg string) {
	for t := range 4 {
		start := i
		i, msg = scanToken(s, i)
		if msg != "" {
			return i, 0, msg
		}
		tok := s[start:i]
		if strings.Trim(tok, "_") == "" && (t != 2 || len(tok) != 1) {
			return start, 0, msgPlaceholder
		}
		switch t {
		case 0:
			if tok == "gts" {
				return start, 0, msgPrefixTwice
			}
			seg.Vendor = tok
		case 1:
			seg.Package = tok
		case 2:
			seg.Namespace = tok
		case 3:
			seg.Type = tok
			typeStart = start
		}
		if i == len(s) || s[i] != '.' {
			// s[i] is '~' (scanToken stops only at '.', '~' or the end).
			switch {
			case looksLikeVersion(tok):
				return start, 0, msgTooFewTokens
			case t < 3:
				return i, 0, msgIncomplete
			default:
				return i, 0, msgMissingVersion
			}
		}
		i++ // '.'
		if i == len(s) && partial {
			return i, typeStart, ""
		}
	}
	return i, typeStart, ""
}

// versionStartError explains why c, at offset i where a segment's version
// should start, is not its 'v': most likely a name token too few (a type token
// typ at typeStart that looks like a version) or too many.
func versionStartError(c byte, i int, typ string, typeStart int) (off int, msg string) {
	switch {
	case isDigit(c) && looksLikeVersion(typ):
		return typeStart, msgTooFewTokens
	case isLower(c) || c == '_':
		return i, msgTooManyTokens
	case isUpper(c):
		return i, msgUppercase
	case c == '*':
		return i, msgStar
	case c == '~':
		return i, msgMissingVersion
	default:
		return i, msgExpectVersion
	}
}

// scanVersion scans "MAJOR[.MINOR]" starting at i, just past the 'v', into
// seg. It returns the offset just past the version (the end of s or a '~') and
// the offset just past MAJOR. In partial mode, input ending right after
// "vMAJOR." is valid and reported with minorEnd. On failure it returns the
// offset of the problem and a message.
func scanVersion(s string, i int, partial bool, seg *Segment) (end, majEnd int, minorEnd bool, msg string) {
	var off int
	seg.Major, i, off, msg = scanNumber(s, i)
	if msg != "" {
		return off, 0, false, msg
	}
	majEnd = i
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) && partial {
			return i, majEnd, true, ""
		}
		seg.Minor, i, off, msg = scanNumber(s, i)
		if msg != "" {
			return off, 0, false, msg
		}
		seg.HasMinor = true
	}
	if i < len(s) && s[i] != '~' {
		switch c := s[i]; {
		case c == '.':
			return i, 0, false, msgVersionParts
		case c == '*':
			return i, 0, false, msgStar
		case isUpper(c):
			return i, 0, false, msgUppercase
		default:
			return i, 0, false, msgAfterVersion
		}
	}
	return i, majEnd, false, ""
}

// scanToken scans a name token starting at i and returns the offset just past
// it, which is len(s) or the offset of a '.' or '~'. On failure it returns the
// offset of the problem and a message.
func scanToken(s string, i int) (int, string) {
	start := i
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case isLower(c) || c == '_':
		case isDigit(c):
			if i == start {
				return i, msgDigitStart
			}
		case c == '.' || c == '~':
			if i == start {
				return i, msgEmptyToken
			}
			return i, ""
		case isUpper(c):
			return i, msgUppercase
		case c == '*':
			return i, msgStar
		default:
			return i, msgInvalidChar
		}
	}
	if i == start {
		return i, msgEmptyToken
	}
	return i, ""
}

// scanNumber scans a decimal version number at i: at least one digit, no
// leading zeros, at most maxVersion. It returns the value and the offset just
// past it; on failure it returns the offset of the problem and a message.
func scanNumber(s string, i int) (n, end, off int, msg string) {
	start := i
	for ; i < len(s) && isDigit(s[i]); i++ {
		if i > start && s[start] == '0' {
			return 0, 0, start, msgLeadingZero
		}
		n = n*10 + int(s[i]-'0')
		if n > maxVersion {
			return 0, 0, start, msgVersionTooLarge
		}
	}
	if i == start {
		if i < len(s) && isUpper(s[i]) {
			return 0, 0, i, msgUppercase
		}
		return 0, 0, i, msgVersionNumber
	}
	return n, i, 0, ""
}

// looksLikeVersion reports whether a name token has the shape "v" DIGITS, which
// hints that the segment lacks a name token.
func looksLikeVersion(tok string) bool {
	if len(tok) < 2 || tok[0] != 'v' {
		return false
	}
	for i := 1; i < len(tok); i++ {
		if !isDigit(tok[i]) {
			return false
		}
	}
	return true
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
