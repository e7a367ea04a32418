package manifest

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one finding in a deploy folder, at a position of a file (Line 0: the whole file).
type Problem struct {
	File         string
	Line, Column int
	Msg          string
}

// String renders "file:line:column: message", or "file: message" without a position.
func (p Problem) String() string {
	if p.Line <= 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, max(p.Column, 1), p.Msg)
}

// Error is String: a Problem is an error.
func (p Problem) Error() string { return p.String() }

// Problems is every problem found, in the order found until sorted.
type Problems []Problem

// Sort orders the problems by file, line and column (stable).
func (ps Problems) Sort() {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].File != ps[j].File {
			return ps[i].File < ps[j].File
		}
		if ps[i].Line != ps[j].Line {
			return ps[i].Line < ps[j].Line
		}
		return ps[i].Column < ps[j].Column
	})
}

// Error renders the problems one a line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Err is nil without problems, else the problems as an error (errors.As finds Problems).
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}
