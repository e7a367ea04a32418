package odata

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxInputLen is the maximum accepted length in bytes of a $filter or
// $orderby value.
const MaxInputLen = 4096

// MaxDepth is the maximum nesting depth of a $filter expression, counting
// parenthesised groups and "not" operators.
const MaxDepth = 32

type tokKind int

const (
	tkEOF tokKind = iota
	tkIdent
	tkLit // string, number or date-time literal (true/false/null are idents)
	tkLParen
	tkRParen
	tkComma
)

type token struct {
	kind tokKind
	pos  int    // 0-based byte offset
	text string // source text
	lit  Literal
}

// lexer splits input into tokens. Errors carry 0-based offsets; they are
// converted to 1-based positions by the caller.
type lexer struct {
	param string
	src   string
	toks  []token
}

func (lx *lexer) errAt(pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Param: lx.param, Pos: pos + 1, Msg: fmt.Sprintf(format, args...)}
}

// checkInput enforces the length, UTF-8 and NUL restrictions.
func checkInput(param, s string) *SyntaxError {
	if len(s) > MaxInputLen {
		return &SyntaxError{Param: param, Pos: MaxInputLen + 1,
			Msg: fmt.Sprintf("input too long: %d bytes (maximum %d)", len(s), MaxInputLen)}
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return &SyntaxError{Param: param, Pos: i + 1, Msg: "invalid UTF-8 encoding"}
		}
		if r == 0 {
			return &SyntaxError{Param: param, Pos: i + 1, Msg: "NUL character is not allowed"}
		}
		i += n
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

// isWordChar reports characters that may continue a number or date-time
// token; a literal immediately followed by one of them is malformed.
func isWordChar(c byte) bool {
	return isIdentChar(c) || c == '.' || c == ':' || c == '+' || c == '-'
}

// tokenize lexes the whole input (already checked by checkInput).
func (lx *lexer) tokenize() *SyntaxError {
	s := lx.src
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			lx.toks = append(lx.toks, token{kind: tkEOF, pos: len(s)})
			return nil
		}
		c := s[i]
		switch {
		case c == '(':
			lx.toks = append(lx.toks, token{kind: tkLParen, pos: i, text: "("})
			i++
		case c == ')':
			lx.toks = append(lx.toks, token{kind: tkRParen, pos: i, text: ")"})
			i++
		case c == ',':
			lx.toks = append(lx.toks, token{kind: tkComma, pos: i, text: ","})
			i++
		case c == '\'':
			j, str, err := lx.lexString(i)
			if err != nil {
				return err
			}
			lx.toks = append(lx.toks, token{kind: tkLit, pos: i, text: s[i:j],
				lit: Literal{Kind: LitString, Str: str, Raw: s[i:j]}})
			i = j
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			lx.toks = append(lx.toks, token{kind: tkIdent, pos: i, text: s[i:j]})
			i = j
		case isDigit(c) || (c == '-' && i+1 < len(s) && isDigit(s[i+1])):
			j, lit, err := lx.lexNumberOrTime(i)
			if err != nil {
				return err
			}
			lx.toks = append(lx.toks, token{kind: tkLit, pos: i, text: s[i:j], lit: lit})
			i = j
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			hint := ""
			switch r {
			case '"':
				hint = " (string literals use single quotes)"
			case '/':
				hint = " (field paths are not supported)"
			}
			return lx.errAt(i, "unexpected character %q%s", r, hint)
		}
	}
}

// lexString lexes a single-quoted string starting at the quote at s[i]. It returns
// the offset just past the closing quote and the unescaped value.
func (lx *lexer) lexString(i int) (int, string, *SyntaxError) {
	s := lx.src
	var b strings.Builder
	j := i + 1
	for {
		k := strings.IndexByte(s[j:], '\'')
		if k < 0 {
			return 0, "", lx.errAt(i, "unterminated string literal")
		}
		b.WriteString(s[j : j+k])
		j += k + 1
		if j < len(s) && s[j] == '\'' { // '' is an escaped quote
			b.WriteByte('\'')
			j++
			continue
		}
		return j, b.String(), nil
	}
}

// wordEnd returns the end of the run of word characters starting at i.
func wordEnd(s string, i int) int {
	j := i
	for j < len(s) && isWordChar(s[j]) {
		j++
	}
	return j
}

func looksLikeDate(s string) bool {
	return len(s) >= 10 && isDigit(s[0]) && isDigit(s[1]) && isDigit(s[2]) && isDigit(s[3]) &&
		s[4] == '-' && isDigit(s[5]) && isDigit(s[6]) && s[7] == '-' && isDigit(s[8]) && isDigit(s[9])
}

// lexNumberOrTime lexes a number or an unquoted date-time starting at i.
func (lx *lexer) lexNumberOrTime(i int) (int, Literal, *SyntaxError) {
	s := lx.src
	if looksLikeDate(s[i:]) {
		j := wordEnd(s, i)
		raw := s[i:j]
		t, ok := parseDateTime(raw)
		if !ok {
			return 0, Literal{}, lx.errAt(i, "invalid date-time '%s' (expected RFC 3339, e.g. 2026-01-01T00:00:00Z)", truncate(raw))
		}
		return j, Literal{Kind: LitTime, Time: t, Raw: raw}, nil
	}
	j := i
	if s[j] == '-' {
		j++
	}
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	isInt := true
	if j < len(s) && s[j] == '.' {
		isInt = false
		j++
		k := j
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == k {
			return 0, Literal{}, lx.errAt(i, "invalid number '%s'", truncate(s[i:wordEnd(s, i)]))
		}
	}
	if j < len(s) && isWordChar(s[j]) {
		return 0, Literal{}, lx.errAt(i, "invalid number '%s'", truncate(s[i:wordEnd(s, i)]))
	}
	raw := s[i:j]
	if isInt {
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			return j, Literal{Kind: LitNumber, Num: float64(n), IsInt: true, Int: n, Raw: raw}, nil
		}
		// Too large for int64: fall through and treat it as a decimal.
	}
	// The syntax is known to be valid, so ParseFloat can only fail with a
	// range error (overflow to ±Inf); underflow rounds to zero and is fine.
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, Literal{}, lx.errAt(i, "number %s is out of range", raw)
	}
	return j, Literal{Kind: LitNumber, Num: f, Raw: raw}, nil
}

// parseDateTime parses a strict RFC 3339 date-time:
// YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM).
func parseDateTime(s string) (time.Time, bool) {
	digits := func(a, b int) bool {
		if b > len(s) {
			return false
		}
		for k := a; k < b; k++ {
			if !isDigit(s[k]) {
				return false
			}
		}
		return true
	}
	if len(s) < 20 || !looksLikeDate(s) || s[10] != 'T' || !digits(11, 13) || s[13] != ':' ||
		!digits(14, 16) || s[16] != ':' || !digits(17, 19) {
		return time.Time{}, false
	}
	k := 19
	if s[k] == '.' {
		k++
		start := k
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if n := k - start; n < 1 || n > 9 {
			return time.Time{}, false
		}
	}
	switch {
	case k < len(s) && s[k] == 'Z':
		k++
	case k < len(s) && (s[k] == '+' || s[k] == '-'):
		if !digits(k+1, k+3) || k+3 >= len(s) || s[k+3] != ':' || !digits(k+4, k+6) {
			return time.Time{}, false
		}
		if (s[k+1]-'0')*10+(s[k+2]-'0') > 23 || (s[k+4]-'0')*10+(s[k+5]-'0') > 59 {
			return time.Time{}, false
		}
		k += 6
	default:
		return time.Time{}, false
	}
	if k != len(s) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}
