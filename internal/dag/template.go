package dag

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Templates. A string value of a task's params may hold placeholders, each "{{" name "}}" (spaces
// inside the braces are ignored):
//
//   - {{partition_key}}: the run's partition key (only in a partitioned DAG);
//   - {{tasks.<id>.output<path>}}: the output of upstream task <id> (one the task depends on,
//     directly or not), or a part of it: path is a sequence of .member and [index] steps
//     ("{{tasks.extract.output.rows}}", "{{tasks.x.output.items[0].id}}"); no path is the whole
//     output.
//
// A string that is exactly one placeholder becomes the value it names, whatever its JSON type
// ("{{tasks.extract.output.rows}}" may be the number 42 or an array); otherwise each placeholder
// is replaced by the value's text (a string as itself, anything else as compact JSON) and the
// result is a string. "{{" always opens a placeholder: any other name is an error, as is a "{{"
// without its "}}". Member names are never templates.

// ref is one placeholder of a template.
type ref struct {
	text      string // as written, braces included
	partition bool   // {{partition_key}}
	task      string // {{tasks.<task>.output...}}
	path      []step // the output path
	pathText  string // the output path as written (".rows[0]")
}

// step is one step of an output path: a member name or an array index.
type step struct {
	name  string
	index int
	isIdx bool
}

// part is a literal piece of a template or a placeholder.
type part struct {
	lit string
	ref *ref
}

// template is a parsed string: its parts in order.
type template []part

// refs returns the template's placeholders.
func (t template) refs() []ref {
	var out []ref
	for _, p := range t {
		if p.ref != nil {
			out = append(out, *p.ref)
		}
	}
	return out
}

// parseTemplate splits s into literals and placeholders.
func parseTemplate(s string) (template, error) {
	var t template
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			if s != "" {
				t = append(t, part{lit: s})
			}
			return t, nil
		}
		if i > 0 {
			t = append(t, part{lit: s[:i]})
		}
		j := strings.Index(s[i+2:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("unclosed placeholder: %q has no closing }}", abbrev(s[i:]))
		}
		text := s[i : i+2+j+2]
		r, err := parseRef(text, strings.TrimSpace(s[i+2:i+2+j]))
		if err != nil {
			return nil, err
		}
		t = append(t, part{ref: &r})
		s = s[i+2+j+2:]
	}
}

// parseRef parses the name inside a placeholder's braces.
func parseRef(text, name string) (ref, error) {
	r := ref{text: text}
	if name == "partition_key" {
		r.partition = true
		return r, nil
	}
	rest, ok := strings.CutPrefix(name, "tasks.")
	id, after, _ := strings.Cut(rest, ".")
	path, isOutput := strings.CutPrefix(after, "output")
	if !ok || !validID(id) || !isOutput || path != "" && path[0] != '.' && path[0] != '[' {
		return r, fmt.Errorf("unknown placeholder %s: the placeholders are {{partition_key}} and {{tasks.<id>.output<path>}}", abbrev(text))
	}
	steps, err := parsePath(path)
	if err != nil {
		return r, fmt.Errorf("placeholder %s: %w", abbrev(text), err)
	}
	r.task, r.path, r.pathText = id, steps, path
	return r, nil
}

// parsePath parses an output path: .member and [index] steps.
func parsePath(p string) ([]step, error) {
	var out []step
	for p != "" {
		if len(out) == MaxOutputPath {
			return nil, fmt.Errorf("an output path may have at most %d steps", MaxOutputPath)
		}
		switch p[0] {
		case '.':
			n := 1
			for n < len(p) && isNameByte(p[n]) {
				n++
			}
			if n == 1 {
				return nil, fmt.Errorf("a '.' in an output path must be followed by a member name (letters, digits, '_' or '-')")
			}
			out, p = append(out, step{name: p[1:n]}), p[n:]
		case '[':
			end := strings.IndexByte(p, ']')
			i, err := strconv.Atoi(p[1:max(end, 1)])
			if end < 0 || err != nil || i < 0 || p[1] == '+' {
				return nil, fmt.Errorf("a '[' in an output path must be followed by an array index and ']'")
			}
			out, p = append(out, step{index: i, isIdx: true}), p[end+1:]
		default:
			return nil, fmt.Errorf("unexpected %q in an output path: steps are .member and [index]", p[0])
		}
	}
	return out, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// abbrev shortens s for a message.
func abbrev(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// resolver answers a placeholder: its value, or keep to leave it as written.
type resolver func(r ref) (v any, keep bool, err error)

// renderValue replaces the placeholders of every string in v (a decoded JSON value) through res.
func renderValue(v any, res resolver) (any, error) {
	switch x := v.(type) {
	case string:
		return renderString(x, res)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, res)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderValue(e, res)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

// renderString renders one string: a lone placeholder becomes its value, anything else a string.
func renderString(s string, res resolver) (any, error) {
	t, err := parseTemplate(s)
	if err != nil {
		return nil, err
	}
	if len(t) == 1 && t[0].ref != nil {
		v, keep, err := res(*t[0].ref)
		if err != nil || keep {
			return s, err
		}
		return v, nil
	}
	var b strings.Builder
	for _, p := range t {
		if p.ref == nil {
			b.WriteString(p.lit)
			continue
		}
		v, keep, err := res(*p.ref)
		switch {
		case err != nil:
			return nil, err
		case keep:
			b.WriteString(p.ref.text)
		default:
			if str, ok := v.(string); ok {
				b.WriteString(str)
			} else {
				b.Write(raw(v))
			}
		}
	}
	return b.String(), nil
}

// Render resolves the placeholders of a task's params at run time: {{partition_key}} with
// partitionKey and each {{tasks.<id>.output<path>}} with the part of outputs[id] (the upstream
// task's output JSON) the path names. A missing output, or a path that names nothing in it, is an
// error naming the placeholder.
func Render(params json.RawMessage, partitionKey string, outputs map[string]json.RawMessage) (json.RawMessage, error) {
	v, err := decodeValue(params)
	if err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	decoded := map[string]any{}
	out, err := renderValue(v, func(r ref) (any, bool, error) {
		if r.partition {
			if partitionKey == "" {
				return nil, false, fmt.Errorf("%s: the run has no partition key", r.text)
			}
			return partitionKey, false, nil
		}
		o, ok := decoded[r.task]
		if !ok {
			rawOut, have := outputs[r.task]
			if !have {
				return nil, false, fmt.Errorf("%s: the output of task %q is not available", r.text, r.task)
			}
			if o, err = decodeValue(rawOut); err != nil {
				return nil, false, fmt.Errorf("%s: the output of task %q is not JSON: %w", r.text, r.task, err)
			}
			decoded[r.task] = o
		}
		val, err := evalPath(o, r.path)
		if err != nil {
			return nil, false, fmt.Errorf("tasks.%s.output%s: %w", r.task, r.pathText, err)
		}
		return val, false, nil
	})
	if err != nil {
		return nil, err
	}
	return raw(out), nil
}

// evalPath follows path into v.
func evalPath(v any, path []step) (any, error) {
	where := "output"
	for _, s := range path {
		if s.isIdx {
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s is %s, not an array", where, typeName(v))
			}
			if s.index >= len(list) {
				return nil, fmt.Errorf("%s has %d items, no index %d", where, len(list), s.index)
			}
			v, where = list[s.index], where+"["+strconv.Itoa(s.index)+"]"
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is %s, not an object", where, typeName(v))
		}
		if v, ok = m[s.name]; !ok {
			return nil, fmt.Errorf("%s has no member %q", where, s.name)
		}
		where += "." + s.name
	}
	return v, nil
}
