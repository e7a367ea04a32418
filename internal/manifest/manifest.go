// Package manifest reads a deploy folder: one resource per manifest file (YAML or JSON), the
// Starlark source of entrypoints beside them. `lark deploy` and `lark validate` read a whole folder
// tree with LoadTree; `lark test` reads the folder its tests sit in with Load.
//
// The format (docs/cli.md "folder format", docs/testing.md "The deploy folder"):
//   - every *.yaml, *.yml and *.json file (hidden files and folders skipped) is one manifest
//     holding ONE object; YAML that JSON cannot express (timestamps, merge keys, repeated keys,
//     infinities) is refused, and numbers are kept as written;
//   - no "kind" member, or "kind: entrypoint": the registration body of POST /entrypoints, whose
//     Starlark source may be left out: it is then read from implementation.code.file (relative to
//     the manifest) or, with neither, from the .star file of the manifest's base name;
//     implementation.adapter, implementation.kind and code.language default to Starlark's;
//     an implementation of kind workflow_spec (a DAG) has no source: it is sent as written, its
//     adapter defaulting to the DAG adapter for format "dag"; a workflow entrypoint's
//     traits.workflow members default to 000's (WorkflowTraits): no compensation handlers,
//     checkpointing automatic, max_suspension_days 30;
//   - "kind: schedule", "kind: trigger", "kind: webhook": the create bodies of /schedules,
//     /triggers and /webhook-triggers, plus kind;
//   - *_test.star files are tests, never deployed.
//
// Every problem is reported, each with its file, line and column; a server's findings on a body
// are placed back in the manifest or the .star file with Resource.Finding.
package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/larkrun/lark/internal/gts"
)

// Size bounds: a manifest or a Starlark source larger than these is refused.
const (
	MaxManifestBytes = 1 << 20
	MaxSourceBytes   = 1 << 20
	// MaxFiles bounds the manifests of one folder (of one tree, for LoadTree).
	MaxFiles = 1000
	// MaxFolderDepth bounds the nesting of folders LoadTree reads; deeper ones are skipped.
	MaxFolderDepth = 16
)

// Starlark defaults of an entrypoint's implementation.
const (
	StarlarkAdapter  = "gts.x.core.serverless.adapter.starlark.v1~"
	StarlarkKind     = "code"
	StarlarkLanguage = "starlark"
)

// DAG defaults: an implementation of kind workflow_spec declares its workflow instead of carrying
// code (docs/dag.md); without an adapter, a spec of format "dag" is for DAGAdapter.
const (
	WorkflowSpecKind = "workflow_spec"
	DAGAdapter       = "gts.x.core.serverless.adapter.dag.v1~"
)

// Workflow trait defaults (000's WorkflowTraits schema): what a workflow entrypoint's manifest may
// leave out of traits.workflow. The compensation handlers on_failure and on_cancel default to null
// (none).
const (
	DefaultCheckpointing     = "automatic"
	DefaultMaxSuspensionDays = 30
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
	root             *yaml.Node // the manifest's mapping, for positions
	source           *yaml.Node // an inline implementation.code.source
	lines            []string   // the manifest's lines (for inline sources' columns)
}

// ID is the resource's id member: entrypoint_id, schedule_id, trigger_id or webhook_trigger_id
// ("" when absent).
func (r Resource) ID() string {
	key := map[string]string{KindEntrypoint: "entrypoint_id", KindSchedule: "schedule_id", KindTrigger: "trigger_id",
		KindWebhook: "webhook_trigger_id"}[r.Kind]
	return str(r.Body[key])
}

// Key identifies the resource across deploys: its ID, or for a schedule or a webhook trigger
// without one, its name ("" when neither is given).
func (r Resource) Key() string {
	if k := r.ID(); k != "" {
		return k
	}
	if r.Kind == KindSchedule || r.Kind == KindWebhook {
		return str(r.Body["name"])
	}
	return ""
}

// JSON renders the body as sent to the API.
func (r Resource) JSON() (json.RawMessage, error) {
	return Encode(r.Body)
}

// Set is what a folder holds, each list in file-name order.
type Set struct {
	Entrypoints, Schedules, Triggers, Webhooks []Resource
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

// Load reads every manifest of dir (not of its subfolders). The error, when there are problems,
// is Problems: every one of them, sorted; the Set then holds the manifests that were read well.
func Load(dir string) (Set, error) {
	var set Set
	ents, err := os.ReadDir(dir)
	if err != nil {
		return set, err
	}
	var files []string
	for _, e := range ents {
		if e.Type().IsRegular() && IsManifest(e.Name()) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) > MaxFiles {
		return set, fmt.Errorf("%s: %d manifests, more than %d", dir, len(files), MaxFiles)
	}
	sort.Strings(files)
	rs, probs := readAll(files, false)
	for _, r := range rs {
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
	probs.Sort()
	return set, probs.Err()
}

// LoadTree reads every manifest under dir, subfolders included (hidden ones skipped, at most
// MaxFolderDepth deep), for a deploy: each resource must carry what identifies it on later
// deploys (Key). The resources that were read well come in deploy order: the entrypoints that
// the folder's workflows name as compensation handlers first (a workflow's handler must exist
// when it is registered), the other entrypoints, then the DAGs (their tasks' functions must
// exist), then schedules, triggers and webhook triggers; files in name order. problems holds every problem found (unsorted); err is for a folder that
// cannot be read at all.
func LoadTree(dir string) (rs []Resource, problems Problems, err error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, err
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a folder", dir)
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
			if rel, err := filepath.Rel(dir, path); err == nil && strings.Count(rel, string(filepath.Separator)) >= MaxFolderDepth {
				return filepath.SkipDir
			}
			return nil
		}
		if IsManifest(name) {
			files = append(files, path)
		}
		if len(files) > MaxFiles {
			return fmt.Errorf("more than %d manifests under %s", MaxFiles, dir)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(files)
	rs, problems = readAll(files, true)
	handlers := map[string]bool{}
	for _, r := range rs {
		for _, h := range compensationHandlers(r.Body) {
			handlers[h] = true
		}
	}
	rank := func(r Resource) int {
		n := map[string]int{KindEntrypoint: 1, KindSchedule: 3, KindTrigger: 4, KindWebhook: 5}[r.Kind]
		switch {
		case r.IsDAG():
			n = 2 // after the functions its tasks run
		case r.Kind == KindEntrypoint && handlers[r.Key()]:
			n = 0
		}
		return n
	}
	sort.SliceStable(rs, func(i, j int) bool { return rank(rs[i]) < rank(rs[j]) })
	return rs, problems, nil
}

// LoadFile reads one manifest; the error, when there are problems, is Problems.
func LoadFile(path string) (Resource, error) {
	r, probs := read(path, false)
	if r == nil {
		return Resource{}, probs.Err()
	}
	return *r, probs.Err()
}

// readAll reads files in order; a resource may be declared once (by kind and key).
func readAll(files []string, deploy bool) ([]Resource, Problems) {
	var rs []Resource
	var probs Problems
	for _, f := range files {
		r, ps := read(f, deploy)
		probs = append(probs, ps...)
		if r != nil && len(ps) == 0 {
			rs = append(rs, *r)
		}
	}
	seen := map[string]string{}
	out := rs[:0]
	for _, r := range rs {
		k := r.Kind + "\x00" + r.Key()
		if r.Key() == "" {
			out = append(out, r)
			continue
		}
		if prev, ok := seen[k]; ok {
			probs = append(probs, Problem{File: r.File, Line: r.root.Line, Column: r.root.Column,
				Msg: fmt.Sprintf("%s %s is also declared in %s", r.Kind, r.Key(), prev)})
			continue
		}
		seen[k] = r.File
		out = append(out, r)
	}
	return out, probs
}

// read parses one manifest file; for a deploy, a resource without its Key is a problem.
func read(path string, deploy bool) (*Resource, Problems) {
	root, body, text, probs := readObject(path)
	if len(probs) > 0 {
		return nil, probs
	}
	r := &Resource{Kind: KindEntrypoint, File: path, Body: body, root: root, lines: strings.Split(string(text), "\n")}
	if k, ok := body["kind"]; ok {
		switch s, _ := k.(string); s {
		case KindEntrypoint, KindSchedule, KindTrigger, KindWebhook:
			r.Kind = s
		default:
			return nil, Problems{r.at("$.kind", "kind must be entrypoint, schedule, trigger or webhook, got %s", brief(k))}
		}
		delete(body, "kind")
	}
	if deploy && r.Key() == "" {
		switch r.Kind {
		case KindEntrypoint:
			probs = append(probs, r.at("$", "an entrypoint manifest needs entrypoint_id (a GTS id), or a kind: schedule, trigger or webhook"))
		case KindTrigger:
			probs = append(probs, r.at("$", "a trigger manifest needs trigger_id (it identifies the trigger on later deploys)"))
		default:
			probs = append(probs, r.at("$", "a %s manifest needs a name (or its id) to identify it on later deploys", r.Kind))
		}
	}
	if r.Kind == KindEntrypoint {
		probs = append(probs, r.prepareEntrypoint()...)
		probs = append(probs, r.defaultWorkflowTraits()...)
	}
	return r, probs
}

// defaultWorkflowTraits fills in what a workflow entrypoint's manifest leaves out of
// traits.workflow (traits.workflow itself included): compensation {on_failure: null, on_cancel:
// null}, checkpointing {strategy: automatic}, max_suspension_days 30. A member written as null
// counts as left out; one of another type is sent as written, for the server to judge. Functions
// and ids that are not entrypoint ids are not touched.
func (r *Resource) defaultWorkflowTraits() Problems {
	id, err := gts.Parse(r.ID())
	if err != nil {
		return nil
	}
	if kind, err := gts.EntrypointKind(id); err != nil || kind != gts.KindWorkflow {
		return nil
	}
	traits, p := r.object(r.Body, "traits", "traits")
	if p != nil {
		return Problems{*p}
	}
	wf, p := r.object(traits, "workflow", "traits.workflow")
	if p != nil {
		return Problems{*p}
	}
	comp, p := r.object(wf, "compensation", "traits.workflow.compensation")
	if p != nil {
		return Problems{*p}
	}
	for _, k := range []string{"on_failure", "on_cancel"} {
		if _, ok := comp[k]; !ok {
			comp[k] = nil
		}
	}
	cp, p := r.object(wf, "checkpointing", "traits.workflow.checkpointing")
	if p != nil {
		return Problems{*p}
	}
	if cp["strategy"] == nil {
		cp["strategy"] = DefaultCheckpointing
	}
	if wf["max_suspension_days"] == nil {
		wf["max_suspension_days"] = json.Number(fmt.Sprint(DefaultMaxSuspensionDays))
	}
	return nil
}

// at is a problem at the value a JSON path names (or its closest written ancestor).
func (r *Resource) at(path, format string, args ...any) Problem {
	n := nodeAt(r.root, path)
	return Problem{File: r.File, Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)}
}

// brief renders a value for a message, at most 40 characters of its JSON.
func brief(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if s := string(b); len(s) > 40 {
		return s[:37] + "..."
	}
	return string(b)
}

// object returns parent[key] as an object, creating it when absent (or null).
func (r *Resource) object(parent map[string]any, key, path string) (map[string]any, *Problem) {
	v, ok := parent[key]
	if !ok || v == nil {
		m := map[string]any{}
		parent[key] = m
		return m, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		p := r.at("$."+path, "%s must be an object", path)
		return nil, &p
	}
	return m, nil
}

// prepareEntrypoint fills the Starlark defaults and puts the source in from its .star file.
// Another adapter's implementation is sent as written, but for its code.file, read in too.
func (r *Resource) prepareEntrypoint() Problems {
	impl, p := r.object(r.Body, "implementation", "implementation")
	if p != nil {
		return Problems{*p}
	}
	if impl["kind"] == WorkflowSpecKind {
		// A declared workflow (a DAG) has no source: its implementation is sent as written.
		if _, ok := impl["adapter"]; !ok && isDAGSpec(impl) {
			impl["adapter"] = DAGAdapter
		}
		return nil
	}
	if _, ok := impl["adapter"]; !ok {
		impl["adapter"] = StarlarkAdapter
	}
	starlark := impl["adapter"] == StarlarkAdapter
	if !starlark {
		if _, ok := impl["code"]; !ok {
			return nil
		}
	}
	if _, ok := impl["kind"]; !ok && starlark {
		impl["kind"] = StarlarkKind
	}
	code, p := r.object(impl, "code", "implementation.code")
	if p != nil {
		return Problems{*p}
	}
	if _, ok := code["language"]; !ok && starlark {
		code["language"] = StarlarkLanguage
	}
	src, hasSource := code["source"]
	file, hasFile := code["file"]
	delete(code, "file")
	switch {
	case hasSource && hasFile:
		return Problems{r.at("$.implementation.code.file", "give implementation.code.source or implementation.code.file, not both")}
	case hasSource:
		if _, ok := src.(string); !ok {
			return Problems{r.at("$.implementation.code.source", "implementation.code.source must be a string")}
		}
		r.source = nodeAt(r.root, "$.implementation.code.source")
		return nil
	case hasFile:
		name, ok := file.(string)
		if !ok || name == "" {
			return Problems{r.at("$.implementation.code.file", "implementation.code.file must be a path relative to the manifest")}
		}
		if filepath.IsAbs(name) || strings.HasPrefix(name, "/") {
			return Problems{r.at("$.implementation.code.file", "implementation.code.file must be relative to the manifest")}
		}
		r.SourceFile = filepath.Join(filepath.Dir(r.File), filepath.FromSlash(name))
	case !starlark:
		return nil
	default:
		r.SourceFile = strings.TrimSuffix(r.File, filepath.Ext(r.File)) + ".star"
	}
	where := "$.implementation.code.file"
	if !hasFile {
		where = "$"
	}
	b, err := readBounded(r.SourceFile, MaxSourceBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Problems{r.at(where, "no Starlark source: %s does not exist (give implementation.code.source or implementation.code.file)", r.SourceFile)}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Problems{r.at(where, "the Starlark source %s: %v", r.SourceFile, err)}
	}
	code["source"] = string(b)
	return nil
}

// isDAGSpec reports whether an implementation's workflow_spec has format "dag".
func isDAGSpec(impl map[string]any) bool {
	ws, _ := impl["workflow_spec"].(map[string]any)
	return ws["format"] == "dag"
}

// IsDAG reports whether an entrypoint manifest declares a workflow (implementation.kind
// workflow_spec, such as a DAG) instead of carrying code.
func (r Resource) IsDAG() bool {
	impl, _ := r.Body["implementation"].(map[string]any)
	return r.Kind == KindEntrypoint && impl["kind"] == WorkflowSpecKind
}

// TaskEntrypoints returns the entrypoint_id of each task of a DAG manifest's spec (none for
// another manifest).
func (r Resource) TaskEntrypoints() []string {
	if !r.IsDAG() {
		return nil
	}
	impl, _ := r.Body["implementation"].(map[string]any)
	ws, _ := impl["workflow_spec"].(map[string]any)
	spec, _ := ws["spec"].(map[string]any)
	tasks, _ := spec["tasks"].([]any)
	var out []string
	for _, t := range tasks {
		task, _ := t.(map[string]any)
		if s := str(task["entrypoint_id"]); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// compensationHandlers returns the ids of traits.workflow.compensation.on_failure and on_cancel.
func compensationHandlers(body map[string]any) []string {
	var out []string
	traits, _ := body["traits"].(map[string]any)
	wf, _ := traits["workflow"].(map[string]any)
	comp, _ := wf["compensation"].(map[string]any)
	for _, k := range []string{"on_failure", "on_cancel"} {
		if s := str(comp[k]); s != "" {
			out = append(out, s)
		}
	}
	return out
}
