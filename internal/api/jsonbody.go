package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/problem"
)

// MaxJSONDepth is how deeply arrays and objects may nest in a request body (docs/api.md §1): the
// stored-JSON limit (invocation.MaxJSONDepth), counting the body itself as one level, so nothing a
// body carries can be nested deeper than what may be stored. It is generous for invocation params
// and far below what would cost the server (or SQLite's JSON functions) anything.
const MaxJSONDepth = invocation.MaxJSONDepth

// frame is one open array or object while checkJSON walks a document.
type frame struct {
	object bool
	keys   map[string]bool
	key    bool   // the next string token in this object is a member name
	last   string // the member name whose value comes next (objects)
	path   string // JSON path of the container
	index  int    // the next element's index (arrays)
}

// checkJSON is the one gate every request body goes through before it is decoded: b must be
// exactly one JSON value (only whitespace after it), valid UTF-8 (escapes of lone surrogates
// included), nested at most MaxJSONDepth deep, with no member name twice in one object. Syntax,
// encoding and depth errors answer 400; a duplicate member answers 422 DUPLICATE_KEY.
//
// A body that passes is recognised in one pass over its bytes without allocating per token
// (fastCheckJSON); only a body it cannot vouch for goes through the token by token walk that
// finds what is wrong and where (explainJSON).
func checkJSON(b []byte) error {
	if fastCheckJSON(b) {
		return nil
	}
	return explainJSON(b)
}

// explainJSON is checkJSON's token by token walk: it returns the error of a body that breaks a
// rule, with the path where it does (nil when it breaks none).
func explainJSON(b []byte) error {
	if !utf8.Valid(b) {
		return problem.BadRequest("malformed JSON: the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*frame
	var prev int64
	done := false
	for {
		tok, err := dec.Token()
		switch {
		case errors.Is(err, io.EOF) && done:
			return nil
		case errors.Is(err, io.EOF):
			return problem.BadRequest("malformed JSON: unexpected end of the body")
		case done:
			return problem.BadRequest("malformed JSON: unexpected data after the top-level value")
		case err != nil:
			return problem.BadRequest("malformed JSON: %s", err.Error())
		}
		off := dec.InputOffset()
		raw := b[prev:off]
		prev = off
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			done = len(stack) == 0
			continue
		}
		path := "$"
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			switch {
			case top.object && top.key:
				name, _ := tok.(string)
				if err := checkString(name, raw); err != nil {
					return err
				}
				if top.keys[name] {
					return problem.Validation("duplicate member", []problem.Issue{{Path: top.path + "." + name, Code: "DUPLICATE_KEY",
						Message: "member '" + name + "' appears more than once"}})
				}
				top.keys[name], top.key, top.last = true, false, name
				continue
			case top.object:
				top.key = true
				path = top.path + "." + top.last
			default:
				path = top.path + "[" + strconv.Itoa(top.index) + "]"
				top.index++
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			if len(stack) >= MaxJSONDepth {
				return problem.BadRequest("malformed JSON: nested deeper than %d levels at %s", MaxJSONDepth, path)
			}
			f := &frame{object: v == '{', key: v == '{', path: path}
			if f.object {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
			continue
		case string:
			if err := checkString(v, raw); err != nil {
				return err
			}
		}
		done = len(stack) == 0
	}
}

// checkString refuses a decoded string whose U+FFFD replacement characters are not all in the
// source (raw, the bytes of its token): encoding/json replaces an escaped lone surrogate with
// U+FFFD silently.
func checkString(s string, raw []byte) error {
	n := strings.Count(s, "\uFFFD")
	if n == 0 {
		return nil
	}
	lower := bytes.ToLower(raw)
	if n > bytes.Count(raw, []byte("\uFFFD"))+bytes.Count(lower, []byte(`\ufffd`)) {
		return problem.BadRequest("malformed JSON: a string holds an invalid UTF-16 escape (a lone surrogate)")
	}
	return nil
}

// readJSON reads a request body and checks it with checkJSON. An empty (or all-whitespace) body
// returns nil when optional is set and 400 otherwise; a body declared as anything but JSON
// (checkMediaType) answers 415.
func readJSON(r *http.Request, optional bool) ([]byte, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if optional {
			return nil, nil
		}
		return nil, problem.BadRequest("a JSON body is required")
	}
	if err := checkMediaType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	if err := checkJSON(b); err != nil {
		return nil, err
	}
	return b, nil
}

// checkMediaType accepts a request body's Content-Type when it is absent (a client that does not
// say is taken at its word that the body is JSON), application/json, or any structured-syntax
// "+json" type (application/merge-patch+json, application/problem+json, ...), with any
// parameters. Anything else, or a header that does not parse as a media type, answers 415.
func checkMediaType(ct string) error {
	if strings.TrimSpace(ct) == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return problem.New(problem.TypeUnsupportedMedia, "the Content-Type %q is not a media type; send the body as application/json", ct).
			With("accepted_media_types", acceptedMediaTypes)
	}
	if mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return problem.New(problem.TypeUnsupportedMedia, "the request body is %s; this endpoint takes application/json", mt).
		With("accepted_media_types", acceptedMediaTypes)
}

// acceptedMediaTypes is the 415 problem's accepted_media_types member.
var acceptedMediaTypes = []string{"application/json", "application/*+json"}
