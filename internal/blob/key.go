package blob

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds of a key, those of S3 (1,024 bytes) and of a file name (255 bytes), so that a key valid
// on one store is valid on every store.
const (
	MaxKeyBytes     = 1024
	MaxSegmentBytes = 255
)

// TempPrefix starts the names of the local store's temporary files; no key segment may start
// with it, so a temporary file is never mistaken for an object.
const TempPrefix = ".blob-tmp-"

// ValidKey checks a key: non-empty, at most MaxKeyBytes of UTF-8, segments separated by single
// slashes, none empty (no leading or trailing slash, no "//"), none "." or "..", none longer than
// MaxSegmentBytes or starting with TempPrefix, and no control character or backslash anywhere. A
// valid key names the same object on every store and never leaves the local store's directory.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: %d bytes, over %d", ErrInvalidKey, len(key), MaxKeyBytes)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: not UTF-8", ErrInvalidKey)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("%w: %q has a control character or a backslash", ErrInvalidKey, key)
		}
	}
	for _, seg := range strings.Split(key, "/") {
		if err := validSegment(seg); err != nil {
			return fmt.Errorf("%w: %q: %s", ErrInvalidKey, key, err.Error())
		}
	}
	return nil
}

// validSegment checks one segment of a key.
func validSegment(seg string) error {
	switch {
	case seg == "":
		return fmt.Errorf("empty segment (leading, trailing or double slash)")
	case seg == "." || seg == "..":
		return fmt.Errorf("segment %q", seg)
	case len(seg) > MaxSegmentBytes:
		return fmt.Errorf("segment of %d bytes, over %d", len(seg), MaxSegmentBytes)
	case strings.HasPrefix(seg, TempPrefix):
		return fmt.Errorf("segment starts with the reserved %q", TempPrefix)
	}
	return nil
}

// ValidPrefix checks a List prefix: empty (every key), or a valid key, with or without a slash
// after it. It matches as a string: "a/b" lists "a/b", "a/b/c" and "a/bc"; "a/b/" only "a/b/c".
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	return nil
}
