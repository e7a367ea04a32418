package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds of a deploy folder.
const (
	maxManifestBytes = 1 << 20 // one manifest or .star file
	maxManifests     = 1000
	maxDepth         = 16 // nested folders
	starlarkAdapter  = "gts.x.core.serverless.adapter.starlark.v1~"
)

// Manifest kinds.
const (
	kindEntrypoint = "entrypoint"
	kindSchedule   = "schedule"
	kindTrigger    = "trigger"
	kindWebhook    = "webhook"
)

// manifest is one object of a deploy folder, ready to send.
type manifest struct {
	path string     // the manifest file
	kind string     // entrypoint, schedule, trigger or webhook
	root *yaml.Node // its mapping node, for positions
	body map[string]any
	// Entrypoints: the .star file the source came from ("" when inline), and the source node
	// (inline sources) for positions.
	starPath   string
	sourceNode *yaml.Node
	lines      []string // the manifest's lines (for inline sources' columns)
	// key is the identity: the entrypoint's GTS id, a schedule's or trigger's id or name.
	key string
}

// problem is one finding tied to a file position.
type problem struct {
	file      string
	line, col int
	msg       string
}

// String renders file:line:column: message (file: message without a position).
func (p problem) String() string {
	if p.line <= 0 {
		return fmt.Sprintf("%s: %s", p.file, p.msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.file, p.line, max(p.col, 1), p.msg)
}

func sortProblems(ps []problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].file != ps[j].file {
			return ps[i].file < ps[j].file
		}
		if ps[i].line != ps[j].line {
			return ps[i].line < ps[j].line
		}
		return ps[i].col < ps[j].col
	})
}

// loadFolder reads every manifest under dir (recursively; hidden files and folders skipped) and
// returns them with every problem found locally.
func loadFolder(dir string) ([]*manifest, []problem, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	if !st.IsDir() {
		return nil, nil, usageErr("%s is not a folder", dir)
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if path != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if rel, err := filepath.Rel(dir, path); err == nil && strings.Count(rel, string(filepath.Separator)) >= maxDepth {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
			files = append(files, path)
		}
		if len(files) > maxManifests {
			return fmt.Errorf("more than %d manifests under %s", maxManifests, dir)
		}
		return nil
	})
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	sort.Strings(files)
	var out []*manifest
	var probs []problem
	for _, f := range files {
		m, ps := loadManifest(f)
		probs = append(probs, ps...)
		if m != nil {
			out = append(out, m)
		}
	}
	// An entrypoint id (or a schedule's, trigger's, webhook's key) may be declared once.
	seen := map[string]string{}
	for _, m := range out {
		k := m.kind + "\x00" + m.key
		if m.key == "" {
			continue
		}
		if prev, ok := seen[k]; ok {
			probs = append(probs, problem{file: m.path, line: m.root.Line, col: m.root.Column,
				msg: fmt.Sprintf("%s %s is also declared in %s", m.kind, m.key, prev)})
			continue
		}
		seen[k] = m.path
	}
	// Entrypoints first (the compensation handlers of the folder's workflows before the rest, so
	// that a workflow's handler exists when it is registered), then schedules, triggers and
	// webhooks; files in name order.
	handlers := map[string]bool{}
	for _, m := range out {
		for _, h := range compensationHandlers(m.body) {
			handlers[h] = true
		}
	}
	rank := func(m *manifest) int {
		r := map[string]int{kindEntrypoint: 1, kindSchedule: 2, kindTrigger: 3, kindWebhook: 4}[m.kind]
		if m.kind == kindEntrypoint && handlers[m.key] {
			r = 0
		}
		return r
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out, probs, nil
}

// compensationHandlers returns the ids of traits.workflow.compensation.on_failure and on_cancel.
func compensationHandlers(body map[string]any) []string {
	var out []string
	traits, _ := body["traits"].(map[string]any)
	wf, _ := traits["workflow"].(map[string]any)
	comp, _ := wf["compensation"].(map[string]any)
	for _, k := range []string{"on_failure", "on_cancel"} {
		if s, ok := comp[k].(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// readBounded reads a file of at most maxManifestBytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxManifestBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxManifestBytes)
	}
	return b, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseObject reads a YAML or JSON file holding one object.
func parseObject(path string) (*yaml.Node, map[string]any, []problem) {
	root, body, _, probs := parseObjectText(path)
	return root, body, probs
}

// parseObjectText is parseObject that also returns the file's text.
func parseObjectText(path string) (*yaml.Node, map[string]any, []byte, []problem) {
	b, err := readBounded(path)
	if err != nil {
		return nil, nil, nil, []problem{{file: path, msg: err.Error()}}
	}
	root, body, probs := parseBytes(path, b)
	return root, body, b, probs
}

func parseBytes(path string, b []byte) (*yaml.Node, map[string]any, []problem) {
	if strings.EqualFold(filepath.Ext(path), ".json") {
		if p, ok := jsonSyntax(path, b); !ok {
			return nil, nil, []problem{p}
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, []problem{{file: path, line: 1, col: 1, msg: "empty manifest: want one object"}}
		}
		return nil, nil, []problem{yamlProblem(path, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, []problem{{file: path, line: extra.Line, col: extra.Column, msg: "a manifest holds one object; split the documents into files"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, nil, []problem{yamlProblem(path, err)}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, []problem{{file: path, line: root.Line, col: root.Column, msg: "a manifest must be one object (a mapping)"}}
	}
	v, probs := toJSON(path, root)
	if len(probs) > 0 {
		return nil, nil, probs
	}
	return root, v.(map[string]any), nil
}

// loadManifest parses one manifest file.
func loadManifest(path string) (*manifest, []problem) {
	root, body, text, probs := parseObjectText(path)
	if len(probs) > 0 {
		return nil, probs
	}
	m := &manifest{path: path, root: root, body: body, kind: kindEntrypoint, lines: strings.Split(string(text), "\n")}
	if k, ok := body["kind"]; ok {
		ks, _ := k.(string)
		switch ks {
		case kindEntrypoint, kindSchedule, kindTrigger, kindWebhook:
			m.kind = ks
		default:
			n := nodeAt(root, "$.kind")
			return nil, []problem{{file: path, line: n.Line, col: n.Column,
				msg: fmt.Sprintf("kind %s: want entrypoint, schedule, trigger or webhook", compact(mustJSON(k), 40))}}
		}
		delete(body, "kind")
	}
	switch m.kind {
	case kindEntrypoint:
		probs = m.prepareEntrypoint()
	case kindSchedule:
		m.key = str(body["schedule_id"])
		if m.key == "" {
			m.key = str(body["name"])
		}
	case kindTrigger:
		m.key = str(body["trigger_id"])
		if m.key == "" {
			probs = append(probs, problem{file: path, line: root.Line, col: root.Column,
				msg: "a trigger manifest needs trigger_id (it identifies the trigger on later deploys)"})
		}
	case kindWebhook:
		m.key = str(body["webhook_trigger_id"])
		if m.key == "" {
			m.key = str(body["name"])
		}
	}
	if (m.kind == kindSchedule || m.kind == kindWebhook) && m.key == "" {
		probs = append(probs, problem{file: path, line: root.Line, col: root.Column,
			msg: fmt.Sprintf("a %s manifest needs a name (or its id) to identify it on later deploys", m.kind)})
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return m, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`"?"`)
	}
	return b
}

// prepareEntrypoint fills the Starlark defaults and inlines the source from its .star file.
func (m *manifest) prepareEntrypoint() []problem {
	at := func(path, msg string) []problem {
		n := nodeAt(m.root, path)
		return []problem{{file: m.path, line: n.Line, col: n.Column, msg: msg}}
	}
	m.key = str(m.body["entrypoint_id"])
	if m.key == "" {
		return at("$", "an entrypoint manifest needs entrypoint_id (a GTS id), or a kind: schedule, trigger or webhook")
	}
	impl, ok := m.body["implementation"].(map[string]any)
	if _, present := m.body["implementation"]; present && !ok {
		return at("$.implementation", "implementation must be an object")
	}
	if !ok {
		impl = map[string]any{}
		m.body["implementation"] = impl
	}
	if _, ok := impl["adapter"]; !ok {
		impl["adapter"] = starlarkAdapter
	}
	if impl["adapter"] != starlarkAdapter {
		return nil // another adapter: sent as written
	}
	if _, ok := impl["kind"]; !ok {
		impl["kind"] = "code"
	}
	code, ok := impl["code"].(map[string]any)
	if _, present := impl["code"]; present && !ok {
		return at("$.implementation.code", "implementation.code must be an object")
	}
	if !ok {
		code = map[string]any{}
		impl["code"] = code
	}
	if _, ok := code["language"]; !ok {
		code["language"] = "starlark"
	}
	file, hasFile := code["file"]
	_, hasSource := code["source"]
	delete(code, "file")
	switch {
	case hasSource && hasFile:
		return at("$.implementation.code.file", "give either implementation.code.source or implementation.code.file, not both")
	case hasSource:
		m.sourceNode = nodeAt(m.root, "$.implementation.code.source")
		return nil
	case hasFile:
		f, ok := file.(string)
		if !ok || f == "" {
			return at("$.implementation.code.file", "implementation.code.file must be a path relative to the manifest")
		}
		m.starPath = filepath.Join(filepath.Dir(m.path), filepath.FromSlash(f))
	default:
		m.starPath = strings.TrimSuffix(m.path, filepath.Ext(m.path)) + ".star"
	}
	src, err := readBounded(m.starPath)
	if err != nil {
		where := "$.implementation.code.file"
		if !hasFile {
			where = "$"
		}
		return at(where, fmt.Sprintf("the Starlark source %s: %v", m.starPath, unwrapPathErr(err)))
	}
	code["source"] = string(src)
	return nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// yamlProblem turns a YAML error into a positioned problem.
func yamlProblem(path string, err error) problem {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if sm := yamlLine.FindStringSubmatch(msg); sm != nil {
		line, _ := strconv.Atoi(sm[1])
		return problem{file: path, line: line, col: 1, msg: sm[2]}
	}
	return problem{file: path, line: 1, col: 1, msg: strings.TrimPrefix(msg, "yaml: ")}
}

// jsonSyntax checks a .json manifest with encoding/json, for its exact error positions.
func jsonSyntax(path string, b []byte) (problem, bool) {
	var v any
	err := json.Unmarshal(b, &v)
	if err == nil {
		return problem{}, true
	}
	off := int64(len(b))
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	line, col := lineCol(b, int(off))
	return problem{file: path, line: line, col: col, msg: strings.TrimPrefix(err.Error(), "json: ")}, false
}

// lineCol converts a byte offset to a 1-based line and column (in bytes).
func lineCol(b []byte, off int) (int, int) {
	off = min(max(off, 0), len(b))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

// toJSON converts a YAML node into JSON values: objects as map[string]any, numbers as
// json.Number (kept as written when they are valid JSON numbers).
func toJSON(path string, n *yaml.Node) (any, []problem) {
	bad := func(msg string) (any, []problem) {
		return nil, []problem{{file: path, line: n.Line, col: n.Column, msg: msg}}
	}
	switch n.Kind {
	case yaml.AliasNode:
		return toJSON(path, n.Alias)
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		var probs []problem
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				probs = append(probs, problem{file: path, line: k.Line, col: k.Column, msg: "keys must be plain strings (no merge keys)"})
				continue
			}
			if _, dup := out[k.Value]; dup {
				probs = append(probs, problem{file: path, line: k.Line, col: k.Column, msg: fmt.Sprintf("key %q repeated", k.Value)})
				continue
			}
			val, ps := toJSON(path, v)
			probs = append(probs, ps...)
			out[k.Value] = val
		}
		return out, probs
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		var probs []problem
		for _, c := range n.Content {
			val, ps := toJSON(path, c)
			probs = append(probs, ps...)
			out = append(out, val)
		}
		return out, probs
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return bad(err.Error())
			}
			return b, nil
		case "!!int":
			if json.Valid([]byte(n.Value)) {
				return json.Number(n.Value), nil
			}
			var i int64
			if err := n.Decode(&i); err != nil {
				return bad(fmt.Sprintf("integer %s: %v", n.Value, err))
			}
			return json.Number(strconv.FormatInt(i, 10)), nil
		case "!!float":
			if json.Valid([]byte(n.Value)) {
				return json.Number(n.Value), nil
			}
			var f float64
			if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return bad(fmt.Sprintf("number %s cannot be written in JSON", n.Value))
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
		case "!!str", "":
			return n.Value, nil
		case "!!timestamp":
			return n.Value, nil
		default:
			return bad(fmt.Sprintf("unsupported YAML tag %s", n.Tag))
		}
	}
	return bad("unsupported YAML node")
}

// nodeAt finds the node of a JSON path ($.a.b[0].c) in a mapping node, or the deepest ancestor
// that exists (a missing member is reported where its parent is).
func nodeAt(root *yaml.Node, path string) *yaml.Node {
	n := root
	for _, seg := range splitPath(path) {
		next := (*yaml.Node)(nil)
		switch {
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg {
					next = n.Content[i+1]
					break
				}
			}
		case n.Kind == yaml.SequenceNode:
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

// encodeBody renders a manifest body as JSON.
func encodeBody(body map[string]any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}
