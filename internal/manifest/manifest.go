// Package manifest reads a deploy folder: one resource per manifest file (YAML or JSON), the
// Starlark source of entrypoints beside them. `lark test` loads the entrypoints (and the schedules,
// triggers and webhook triggers) of the folder its tests sit in with it.
//
// The format (docs/testing.md, "The deploy folder"):
//   - every *.yaml, *.yml and *.json file of the folder (not its subfolders; hidden files skipped) is
//     one manifest holding ONE object;
//   - no "kind" member, or "kind: entrypoint": the registration body of POST /entrypoints, whose
//     Starlark source may be left out: it is then read from implementation.code.file (relative to
//     the manifest) or, with neither, from the .star file of the manifest's base name;
//     implementation.adapter, implementation.kind and code.language default to Starlark's;
//   - "kind: schedule", "kind: trigger", "kind: webhook": the create bodies of /schedules,
//     /triggers and /webhook-triggers, plus kind;
//   - *_test.star files are tests, never deployed.
//
// Errors name the file, line and column.
package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Size bounds: a manifest or a Starlark source larger than these is refused.
const (
	MaxManifestBytes = 1 << 20
	MaxSourceBytes   = 1 << 20
	// MaxFiles bounds the manifests of one folder.
	MaxFiles = 1000
)

// Starlark defaults of an entrypoint's implementation.
const (
	StarlarkAdapter  = "gts.x.core.serverless.adapter.starlark.v1~"
	StarlarkKind     = "code"
	StarlarkLanguage = "starlark"
)

// Kinds of manifests.
const (
	KindEntrypoint = "entrypoint"
	KindSchedule   = "schedule"
	KindTrigger    = "trigger"
	KindWebhook    = "webhook"
)

// Resource is one manifest: its kind, where it was read from, and its API body (without kind).
// Numbers are json.Number, so that the body encodes back to JSON exactly as written.
type Resource struct {
	Kind string
	// File is the manifest's path; SourceFile, for an entrypoint, the .star file its source was
	// read from ("" when the source was inline).
	File, SourceFile string
	Body             map[string]any
	root             *yaml.Node
}

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

// splitPath splits "$.a.b[2].c" into a, b, 2, c.
func splitPath(path string) []string {
	path = strings.TrimPrefix(strings.TrimPrefix(path, "$"), ".")
	path = strings.ReplaceAll(path, "[", ".")
	path = strings.ReplaceAll(path, "]", "")
	if path == "" {
		return nil
	}
	return strings.Split(path, ".")
}

// ID is the resource's id member: entrypoint_id, schedule_id, trigger_id or webhook_trigger_id
// ("" when absent).
func (r Resource) ID() string {
	key := map[string]string{KindEntrypoint: "entrypoint_id", KindSchedule: "schedule_id", KindTrigger: "trigger_id",
		KindWebhook: "webhook_trigger_id"}[r.Kind]
	s, _ := r.Body[key].(string)
	return s
}

// Set is what a folder holds, each list in file-name order.
type Set struct {
	Entrypoints, Schedules, Triggers, Webhooks []Resource
}

// Error is a problem in a manifest, at a position (Line 0: the whole file).
type Error struct {
	File         string
	Line, Column int
	Msg          string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

func errAt(file string, n *yaml.Node, format string, args ...any) *Error {
	e := &Error{File: file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// IsManifest reports whether name is a manifest file name (not hidden, .yaml/.yml/.json).
func IsManifest(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Load reads every manifest of dir. All problems are reported, joined, not just the first.
func Load(dir string) (Set, error) {
	var set Set
	ents, err := os.ReadDir(dir)
	if err != nil {
		return set, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && IsManifest(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if len(names) > MaxFiles {
		return set, fmt.Errorf("%s: %d manifests, more than %d", dir, len(names), MaxFiles)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		r, err := LoadFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch r.Kind {
		case KindEntrypoint:
			set.Entrypoints = append(set.Entrypoints, r)
		case KindSchedule:
			set.Schedules = append(set.Schedules, r)
		case KindTrigger:
			set.Triggers = append(set.Triggers, r)
		case KindWebhook:
			set.Webhooks = append(set.Webhooks, r)
		}
	}
	return set, errors.Join(errs...)
}

// LoadFile reads one manifest.
func LoadFile(path string) (Resource, error) {
	b, err := readBounded(path, MaxManifestBytes)
	if err != nil {
		return Resource{}, err
	}
	root, err := parse(path, b)
	if err != nil {
		return Resource{}, err
	}
	v, err := toValue(path, root)
	if err != nil {
		return Resource{}, err
	}
	body, ok := v.(map[string]any)
	if !ok {
		return Resource{}, errAt(path, root, "a manifest is one object (a mapping)")
	}
	r := Resource{Kind: KindEntrypoint, File: path, Body: body, root: root}
	if k, present := body["kind"]; present {
		s, _ := k.(string)
		switch s {
		case KindEntrypoint, KindSchedule, KindTrigger, KindWebhook:
			r.Kind = s
		default:
			return r, errAt(path, lookup(root, "kind"), "kind must be entrypoint, schedule, trigger or webhook, got %v", k)
		}
		delete(body, "kind")
	}
	if r.Kind == KindEntrypoint {
		if err := fillSource(&r, root); err != nil {
			return r, err
		}
	}
	return r, nil
}

// fillSource applies the implementation defaults and puts the Starlark source in.
func fillSource(r *Resource, root *yaml.Node) error {
	impl, err := object(r, root, r.Body, "implementation")
	if err != nil {
		return err
	}
	code, err := object(r, root, impl, "implementation", "code")
	if err != nil {
		return err
	}
	setDefault(impl, "adapter", StarlarkAdapter)
	setDefault(impl, "kind", StarlarkKind)
	setDefault(code, "language", StarlarkLanguage)
	src, hasSource := code["source"]
	file, hasFile := code["file"]
	switch {
	case hasSource && hasFile:
		return errAt(r.File, lookup(root, "implementation", "code", "file"), "give implementation.code.source or implementation.code.file, not both")
	case hasSource:
		if _, ok := src.(string); !ok {
			return errAt(r.File, lookup(root, "implementation", "code", "source"), "implementation.code.source must be a string")
		}
		return nil
	case hasFile:
		name, ok := file.(string)
		if !ok || name == "" {
			return errAt(r.File, lookup(root, "implementation", "code", "file"), "implementation.code.file must be a file name")
		}
		if filepath.IsAbs(name) {
			return errAt(r.File, lookup(root, "implementation", "code", "file"), "implementation.code.file must be relative to the manifest")
		}
		r.SourceFile = filepath.Join(filepath.Dir(r.File), filepath.FromSlash(name))
		delete(code, "file")
	default:
		base := strings.TrimSuffix(filepath.Base(r.File), filepath.Ext(r.File))
		r.SourceFile = filepath.Join(filepath.Dir(r.File), base+".star")
	}
	b, err := readBounded(r.SourceFile, MaxSourceBytes)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return &Error{File: r.File, Msg: fmt.Sprintf("no Starlark source: %s does not exist (give implementation.code.source or implementation.code.file)", r.SourceFile)}
		}
		return err
	}
	code["source"] = string(b)
	return nil
}

// object returns body[key] as an object, creating it when absent.
func object(r *Resource, root *yaml.Node, body map[string]any, path ...string) (map[string]any, error) {
	key := path[len(path)-1]
	v, ok := body[key]
	if !ok || v == nil {
		m := map[string]any{}
		body[key] = m
		return m, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errAt(r.File, lookup(root, path...), "%s must be an object", strings.Join(path, "."))
	}
	return m, nil
}

func setDefault(m map[string]any, key, v string) {
	if _, ok := m[key]; !ok {
		m[key] = v
	}
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &Error{File: path, Msg: fmt.Sprintf("larger than %d bytes", limit)}
	}
	return b, nil
}

// parse decodes exactly one YAML (or JSON) document.
func parse(path string, b []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: path, Msg: "empty manifest"}
		}
		return nil, &Error{File: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errAt(path, &extra, "a manifest holds one document; this is a second one")
	} else if !errors.Is(err, io.EOF) {
		return nil, &Error{File: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{File: path, Msg: "empty manifest"}
	}
	return doc.Content[0], nil
}

// lookup finds the value node at path (nil when absent).
func lookup(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}
