package manifest

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Position is where in the manifest the member at a JSON path ("$.traits.limits.cpu",
// "$.tags[1]") was written: the line and column of its key (of the element, in an array), or of
// the closest enclosing member when the path goes further than the manifest (a member it left
// out). ok is false for a resource that was not read from a manifest.
func (r Resource) Position(path string) (line, col int, ok bool) {
	n := r.root
	if n == nil {
		return 0, 0, false
	}
	at := n
	for _, step := range splitPath(path) {
		var where *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == step {
					where, n = n.Content[i], n.Content[i+1]
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(n.Content) {
				where, n = n.Content[i], n.Content[i]
			}
		}
		if where == nil {
			break
		}
		at = where
	}
	return at.Line, at.Column, true
}

// Finding places a finding the server made on the resource's body (a JSON path, and for the
// Starlark source a line and column in it) in the deploy folder: a source position in the .star
// file it was read from, or in the manifest's inline source (a block scalar line by line); any
// other path at the value it names in the manifest, or, when the manifest left that member out,
// at the manifest's start with the path before the message.
func (r Resource) Finding(path string, line, col int, msg string) Problem {
	if path == "$.implementation.code.source" && line > 0 {
		if r.SourceFile != "" {
			return Problem{File: r.SourceFile, Line: line, Column: col, Msg: msg}
		}
		if n := r.source; n != nil {
			if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
				// A block scalar: its text starts on the next line, indented.
				return Problem{File: r.File, Line: n.Line + line, Column: col + r.blockIndent(n.Line+line, line), Msg: msg}
			}
			return Problem{File: r.File, Line: n.Line, Column: n.Column, Msg: fmt.Sprintf("source line %d column %d: %s", line, col, msg)}
		}
	}
	if r.root == nil {
		if path != "" && path != "$" {
			msg = path + ": " + msg
		}
		return Problem{File: r.File, Msg: msg}
	}
	n := nodeAt(r.root, path)
	if path != "" && path != "$" && n == r.root {
		msg = path + ": " + msg
	}
	return Problem{File: r.File, Line: n.Line, Column: n.Column, Msg: msg}
}

// blockIndent is the indentation of a block scalar's source line srcLine, found at fileLine of
// the manifest (0 when the lines cannot be matched).
func (r Resource) blockIndent(fileLine, srcLine int) int {
	impl, _ := r.Body["implementation"].(map[string]any)
	code, _ := impl["code"].(map[string]any)
	src := strings.Split(str(code["source"]), "\n")
	if fileLine < 1 || fileLine > len(r.lines) || srcLine < 1 || srcLine > len(src) {
		return 0
	}
	return max(len(r.lines[fileLine-1])-len(src[srcLine-1]), 0)
}

// nodeAt finds the value node of a JSON path ($.a.b[0].c) in a mapping node, or the deepest
// ancestor that exists (a missing member is reported where its parent is).
func nodeAt(root *yaml.Node, path string) *yaml.Node {
	n := root
	for _, seg := range splitPath(path) {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg {
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

// splitPath splits "$.a.b[0]['c.d']" into a, b, 0, c.d.
func splitPath(p string) []string {
	p = strings.TrimPrefix(p, "$")
	var out []string
	for len(p) > 0 {
		switch p[0] {
		case '.':
			p = p[1:]
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			out = append(out, p[:end])
			p = p[end:]
		case '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return out
			}
			out = append(out, strings.Trim(p[1:end], `'"`))
			p = p[end+1:]
		default:
			return out
		}
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
