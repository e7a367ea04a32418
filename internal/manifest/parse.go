package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// ReadObject reads a YAML or JSON file holding one object (at most MaxManifestBytes) into
// JSON-shaped values, with the same rules as a manifest (no kind handling, no defaults). Every
// problem found is returned.
func ReadObject(path string) (map[string]any, Problems) {
	_, body, _, probs := readObject(path)
	return body, probs
}

// readObject is ReadObject that also returns the object's node and the file's text.
func readObject(path string) (*yaml.Node, map[string]any, []byte, Problems) {
	b, err := readBounded(path, MaxManifestBytes)
	if err != nil {
		return nil, nil, nil, Problems{{File: path, Msg: err.Error()}}
	}
	root, body, probs := parseObject(path, b)
	return root, body, b, probs
}

// parseObject decodes b, the text of path: exactly one YAML (or JSON) document holding an object.
func parseObject(path string, b []byte) (*yaml.Node, map[string]any, Problems) {
	if strings.EqualFold(filepath.Ext(path), ".json") {
		if p, ok := jsonSyntax(path, b); !ok {
			return nil, nil, Problems{p}
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, Problems{{File: path, Msg: "empty manifest: want one object"}}
		}
		return nil, nil, Problems{yamlProblem(path, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, Problems{{File: path, Line: extra.Line, Column: extra.Column,
			Msg: "a manifest holds one document; split the documents into files"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, nil, Problems{yamlProblem(path, err)}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, Problems{{File: path, Line: root.Line, Column: root.Column, Msg: "a manifest is one object (a mapping)"}}
	}
	v, probs := toJSON(path, root)
	if len(probs) > 0 {
		return nil, nil, probs
	}
	return root, v.(map[string]any), nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlProblem turns a YAML error into a positioned problem.
func yamlProblem(path string, err error) Problem {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if sm := yamlLine.FindStringSubmatch(msg); sm != nil {
		if line, err := strconv.Atoi(sm[1]); err == nil {
			return Problem{File: path, Line: line, Column: 1, Msg: sm[2]}
		}
	}
	return Problem{File: path, Line: 1, Column: 1, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// jsonSyntax checks a .json manifest with encoding/json, for its exact error positions.
func jsonSyntax(path string, b []byte) (Problem, bool) {
	var v any
	err := json.Unmarshal(b, &v)
	if err == nil {
		return Problem{}, true
	}
	off := int64(len(b))
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	line, col := lineCol(b, int(off))
	return Problem{File: path, Line: line, Column: col, Msg: strings.TrimPrefix(err.Error(), "json: ")}, false
}

// lineCol converts a byte offset to a 1-based line and column (in bytes).
func lineCol(b []byte, off int) (int, int) {
	off = min(max(off, 0), len(b))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

// Encode renders a body as compact JSON, HTML characters unescaped: what is sent to the API.
func Encode(body map[string]any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}
