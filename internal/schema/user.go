package schema

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// defaultCacheSize bounds the number of compiled user schemas kept by a Registry.
const defaultCacheSize = 1024

// userSchemaBase is the base URL under which a user schema is compiled. It is not resolvable:
// relative references inside a user schema are refused like any non-gts reference.
const userSchemaBase = "lark://user-schema/"

// draft2020URLs are the $schema values accepted in user schemas (absent means 2020-12 too).
var draft2020URLs = map[string]bool{
	"https://json-schema.org/draft/2020-12/schema":  true,
	"https://json-schema.org/draft/2020-12/schema#": true,
	"http://json-schema.org/draft/2020-12/schema":   true,
	"http://json-schema.org/draft/2020-12/schema#":  true,
}

// CompileUserSchema compiles a user-supplied JSON Schema (an entrypoint's schema.params or
// schema.returns). The schema must be a JSON object (decoded JSON, or json.RawMessage/[]byte of
// one) and a valid JSON Schema 2020-12 document: it is checked against the metaschema, formats are
// asserted, "$ref": "gts://<id>" resolves to the built-in GTS types, and any other reference that
// leaves the document (http, https, file, relative URLs) is refused. Problems are returned as
// Issues with code "invalid_schema" located under path (e.g. "$.schema.params.type").
//
// A schema over the limits (MaxUserSchemaBytes, MaxUserSchemaDepth, MaxUserSchemaExpanded) is
// refused with one issue of code "schema_too_complex" before it is compiled.
//
// Compiled schemas are cached by a hash of their canonical JSON (bounded, least recently used
// evicted), so calling this for every invocation is cheap, and a schema being compiled is compiled
// once however many callers ask for it meanwhile. The returned schema is immutable and safe for
// concurrent use.
func (r *Registry) CompileUserSchema(path string, schema any) (*jsonschema.Schema, []Issue) {
	s, issues, err := r.CompileUserSchemaContext(context.Background(), path, schema)
	if err != nil { // the background context never ends; be safe
		return nil, []Issue{{Path: path, Code: CodeInvalidSchema, Message: err.Error()}}
	}
	return s, issues
}

// CompileUserSchemaContext is [Registry.CompileUserSchema] that gives up when ctx ends: it then
// returns ctx's error (and no schema or issues) at once. The compilation itself runs to its end in
// the background (the limits keep it short) and its result is cached, so asking again is cheap.
func (r *Registry) CompileUserSchemaContext(ctx context.Context, path string, schema any) (*jsonschema.Schema, []Issue, error) {
	if path == "" {
		path = rootPath
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	doc, err := normalize(schema)
	if err != nil {
		return nil, []Issue{{Path: path, Code: CodeInvalidSchema, Message: err.Error()}}, nil
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, []Issue{{Path: path, Code: CodeInvalidSchema, Message: fmt.Sprintf("schema must be a JSON object, got %s", jsonTypeName(doc))}}, nil
	}
	canon, err := json.Marshal(obj) // encoding/json sorts object keys: canonical enough for a cache key
	if err != nil {
		return nil, []Issue{{Path: path, Code: CodeInvalidSchema, Message: err.Error()}}, nil
	}
	sum := sha256.Sum256(canon)
	key := hex.EncodeToString(sum[:])
	e, ok := r.cache.get(key)
	if !ok {
		f := r.compileOnce(key, canon)
		select {
		case <-f.done:
			e = f.entry
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	if len(e.issues) > 0 {
		out := make([]Issue, len(e.issues))
		for i, is := range e.issues {
			out[i] = Issue{Path: rebase(path, is.Path), Code: is.Code, Message: is.Message}
		}
		return nil, out, nil
	}
	return e.schema, nil, nil
}

// flight is a compilation in progress; entry is set before done is closed.
type flight struct {
	done  chan struct{}
	entry cacheEntry
}

// compileOnce returns the compilation of the schema with this key, starting it in the background
// unless one is already running. The result goes into the cache.
func (r *Registry) compileOnce(key string, canon []byte) *flight {
	r.flightMu.Lock()
	defer r.flightMu.Unlock()
	if f, ok := r.inflight[key]; ok {
		return f
	}
	f := &flight{done: make(chan struct{})}
	r.inflight[key] = f
	go func() {
		defer func() {
			if p := recover(); p != nil {
				f.entry = cacheEntry{issues: []Issue{{Path: rootPath, Code: CodeInvalidSchema, Message: fmt.Sprintf("internal compilation error: %v", p)}}}
			}
			r.cache.put(key, f.entry)
			r.flightMu.Lock()
			delete(r.inflight, key)
			r.flightMu.Unlock()
			close(f.done)
		}()
		f.entry = r.compileUser(key, canon)
	}()
	return f
}

// compileUser compiles a user schema from its canonical JSON, so the compiled (and cached) schema
// shares no memory with the caller's value; issue paths are relative to "$".
func (r *Registry) compileUser(key string, canon []byte) cacheEntry {
	doc, err := decodeJSON(canon)
	if err != nil {
		return cacheEntry{issues: []Issue{{Path: rootPath, Code: CodeInvalidSchema, Message: err.Error()}}}
	}
	obj := doc.(map[string]any)
	if issues := complexity(obj, len(canon)); issues != nil {
		return cacheEntry{issues: issues}
	}
	if s, ok := obj["$schema"]; ok {
		str, isStr := s.(string)
		if !isStr || !draft2020URLs[str] {
			return cacheEntry{issues: []Issue{{
				Path: childPath(rootPath, "$schema"), Code: CodeInvalidSchema,
				Message: "only JSON Schema 2020-12 is supported ($schema must be https://json-schema.org/draft/2020-12/schema or absent)",
			}}}
		}
	}
	loc := userSchemaBase + key + ".json"
	c := r.newCompiler()
	if err := c.AddResource(loc, obj); err != nil {
		return cacheEntry{issues: []Issue{{Path: rootPath, Code: CodeInvalidSchema, Message: err.Error()}}}
	}
	s, err := c.Compile(loc)
	if err != nil {
		return cacheEntry{issues: finalize(compileIssues(err, loc, obj))}
	}
	return cacheEntry{schema: s}
}

// compileIssues converts a compilation error into issues relative to the schema root.
func compileIssues(err error, loc string, doc any) []Issue {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		base, sub := rootPath, doc
		if u, frag, ok := strings.Cut(sve.URL, "#"); ok && u == loc && frag != "" {
			if ptr, perr := url.PathUnescape(frag); perr == nil {
				toks := pointerTokens(ptr)
				base = tokensPath(rootPath, doc, toks)
				sub = lookup(doc, toks)
			}
		}
		return validationIssues(sve.Err, base, sub, CodeInvalidSchema)
	}
	var lue *jsonschema.LoadURLError
	if errors.As(err, &lue) {
		msg := lue.Err.Error()
		var refused *errRefused
		if !errors.As(lue.Err, &refused) {
			msg = fmt.Sprintf("cannot load %q: %v", lue.URL, lue.Err)
		}
		targets := []string{lue.URL, strings.TrimPrefix(lue.URL, userSchemaBase)}
		path := findRef(doc, func(ref string) bool {
			base, _, _ := strings.Cut(ref, "#")
			return base != "" && slices.Contains(targets, base)
		})
		return []Issue{{Path: path, Code: CodeInvalidSchema, Message: msg}}
	}
	path := rootPath
	var jpe *jsonschema.JSONPointerNotFoundError
	if errors.As(err, &jpe) {
		if _, frag, ok := strings.Cut(jpe.URL, "#"); ok {
			if f, perr := url.PathUnescape(frag); perr == nil {
				path = findRef(doc, func(ref string) bool { return ref == "#"+frag || ref == "#"+f })
			}
		}
	}
	msg := strings.ReplaceAll(err.Error(), loc, "")
	return []Issue{{Path: path, Code: CodeInvalidSchema, Message: msg}}
}

// findRef returns the JSON path of the first "$ref" in doc (in key order) for which match reports
// true, or "$" if there is none.
func findRef(doc any, match func(ref string) bool) string {
	var walk func(v any, p string) (string, bool)
	walk = func(v any, p string) (string, bool) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && match(ref) {
				return childPath(p, "$ref"), true
			}
			for _, k := range sortedKeys(v) {
				if got, ok := walk(v[k], childPath(p, k)); ok {
					return got, true
				}
			}
		case []any:
			for i, e := range v {
				if got, ok := walk(e, indexPath(p, i)); ok {
					return got, true
				}
			}
		}
		return "", false
	}
	if p, ok := walk(doc, rootPath); ok {
		return p
	}
	return rootPath
}

// pointerTokens splits a JSON pointer ("/a/b~1c") into unescaped tokens.
func pointerTokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	r := strings.NewReplacer("~1", "/", "~0", "~")
	for i, p := range parts {
		parts[i] = r.Replace(p)
	}
	return parts
}

// lookup returns the value at the given tokens, or nil.
func lookup(v any, toks []string) any {
	for _, t := range toks {
		switch c := v.(type) {
		case map[string]any:
			v = c[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// ValidateValue validates an instance (decoded JSON; numbers may be json.Number or float64, and
// other Go numeric types, []string and the like are accepted too) against a compiled schema.
// Issue paths are prefixed by path, e.g. "$.params.amount" for path "$.params". A nil schema
// accepts nothing and yields one issue.
func (r *Registry) ValidateValue(s *jsonschema.Schema, path string, v any) []Issue {
	if path == "" {
		path = rootPath
	}
	if s == nil {
		return []Issue{{Path: path, Code: CodeInvalidSchema, Message: "no schema to validate against"}}
	}
	inst, err := normalize(v)
	if err != nil {
		return []Issue{{Path: path, Code: CodeSchemaMismatch, Message: err.Error()}}
	}
	if err := s.Validate(inst); err != nil {
		return finalize(validationIssues(err, path, inst, ""))
	}
	return nil
}

// normalize returns v as plain decoded JSON (map[string]any, []any, string, bool, nil, numbers).
// Values that already are (the common case) are returned as is; json.RawMessage and []byte are
// decoded; anything else goes through a JSON round trip.
func normalize(v any) (any, error) {
	switch b := v.(type) {
	case json.RawMessage:
		return decodeRaw(b)
	case []byte:
		return decodeRaw(b)
	}
	if isPlainJSON(v) {
		return v, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("value is not representable as JSON: %w", err)
	}
	return decodeJSON(data)
}

func decodeRaw(data []byte) (any, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return v, nil
}

// isPlainJSON reports whether v consists only of the types the validator understands.
func isPlainJSON(v any) bool {
	switch v := v.(type) {
	case nil, bool, string, json.Number,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	case float64:
		return !isNaNOrInf(v)
	case float32:
		return !isNaNOrInf(float64(v))
	case map[string]any:
		for _, e := range v {
			if !isPlainJSON(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !isPlainJSON(e) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

func isNaNOrInf(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// jsonTypeName names the JSON type of a decoded value.
func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "number"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// cacheEntry is a compiled user schema, or the issues that prevented compiling it (paths relative
// to "$").
type cacheEntry struct {
	schema *jsonschema.Schema
	issues []Issue
}

// schemaCache is a bounded LRU cache of compiled user schemas, safe for concurrent use.
type schemaCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front = most recently used; values are *cacheItem
	items map[string]*list.Element
}

type cacheItem struct {
	key   string
	entry cacheEntry
}

func newSchemaCache(max int) *schemaCache {
	return &schemaCache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *schemaCache) get(key string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return cacheEntry{}, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cacheItem).entry, true
}

func (c *schemaCache) put(key string, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*cacheItem).entry = e
		c.ll.MoveToFront(el)
		return
	}
	c.items[key] = c.ll.PushFront(&cacheItem{key: key, entry: e})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheItem).key)
	}
}

// len is the number of cached schemas (read by the tests).
func (c *schemaCache) len() int { //nolint:unused // only the tests read it (run.tests is false)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
