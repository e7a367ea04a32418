// Package console serves Lark's web console: a single-page application embedded in the binary
// (no CDN, no build step, works offline) that talks to the server only through the public API
// under /api/serverless-runtime/v1 with the bearer token the user pastes at login.
//
// The console's own files carry no data and need no token: index.html is served for /console and
// for every path below it (the application routes in the browser), and the scripts and styles
// under /console/assets/<version>/, where <version> is a hash of the embedded files, so they can be
// cached for a year while index.html is never cached. Every answer carries a strict
// Content-Security-Policy (default-src 'self', no inline script or style). docs/console.md
// describes the pages and the security model.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/larkrun/lark/internal/problem"
)

// Path is where the console is mounted.
const Path = "/console"

// CSP is the Content-Security-Policy of every console answer: the console loads scripts, styles,
// images and API answers from its own origin only, runs no inline script or style, cannot be
// framed and posts no forms elsewhere.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// versionPlaceholder is replaced, in index.html, by the assets' version.
const versionPlaceholder = "__ASSET_VERSION__"

//go:embed assets
var embedded embed.FS

// file is one asset, ready to serve.
type file struct {
	body, gzipped []byte
	contentType   string
}

// ConfigPath is the console's public configuration (JSON): which issuer, if any, offers
// sign-in. It holds no secret.
const ConfigPath = Path + "/config.json"

// Handler serves the console. Build it with New.
type Handler struct {
	version string
	index   file
	assets  map[string]file // by name under assets/ (index.html excluded)
	csp     string
	config  []byte
}

// New returns the console's handler, offering only the token paste at sign-in. The embedded files
// are read, versioned and compressed once per process (compressing them takes a tenth of a second;
// test suites start many servers).
func New() (*Handler, error) {
	return NewWith(Options{})
}

// NewWith returns the console's handler with opts (an issuer to sign in with).
func NewWith(opts Options) (*Handler, error) {
	base, err := loadEmbedded()
	if err != nil {
		return nil, err
	}
	csp, config, err := opts.public()
	if err != nil {
		return nil, err
	}
	h := *base
	h.csp, h.config = csp, config
	return &h, nil
}

var loadEmbedded = sync.OnceValues(func() (*Handler, error) { return newFrom(embedded) })

// newFrom builds a Handler from fsys, which holds an assets/ directory with index.html.
func newFrom(fsys fs.FS) (*Handler, error) {
	h := &Handler{assets: map[string]file{}, csp: CSP, config: []byte("{}\n")}
	var names []string
	err := fs.WalkDir(fsys, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	slices.Sort(names)
	sum := sha256.New()
	raw := map[string][]byte{}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("console asset %s: %w", n, err)
		}
		raw[strings.TrimPrefix(n, "assets/")] = b
		fmt.Fprintf(sum, "%s\x00%d\x00", n, len(b))
		sum.Write(b)
	}
	h.version = hex.EncodeToString(sum.Sum(nil))[:16]
	index, ok := raw["index.html"]
	if !ok {
		return nil, fmt.Errorf("console assets: no index.html")
	}
	delete(raw, "index.html")
	if h.index, err = prepare("index.html", bytes.ReplaceAll(index, []byte(versionPlaceholder), []byte(h.version))); err != nil {
		return nil, err
	}
	for n, b := range raw {
		if h.assets[n], err = prepare(n, b); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// prepare types and compresses one file.
func prepare(name string, b []byte) (file, error) {
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if err != nil {
		return file{}, fmt.Errorf("console asset %s: %w", name, err)
	}
	if _, err := zw.Write(b); err != nil {
		return file{}, fmt.Errorf("console asset %s: %w", name, err)
	}
	if err := zw.Close(); err != nil {
		return file{}, fmt.Errorf("console asset %s: %w", name, err)
	}
	return file{body: b, gzipped: z.Bytes(), contentType: ct}, nil
}

// Version is the hash of the embedded files that names the asset directory
// (/console/assets/<version>/).
func (h *Handler) Version() string { return h.version }

// Wrap returns a handler that serves the console at Path and below and hands every other request
// to next (the API).
func Wrap(next http.Handler) (http.Handler, error) {
	return WrapWith(next, Options{})
}

// WrapWith is Wrap with opts.
func WrapWith(next http.Handler, opts Options) (http.Handler, error) {
	h, err := NewWith(opts)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Path || strings.HasPrefix(r.URL.Path, Path+"/") {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// ServeHTTP serves index.html for Path and every application path below it, and the versioned
// assets under Path/assets/<version>/.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		writeProblem(w, r, problem.New(problem.TypeMethodNotAllowed, "method %s is not allowed on the console; it is read with GET", r.Method))
		return
	}
	if r.URL.Path == ConfigPath {
		hd.Set("Cache-Control", "no-store")
		serve(w, r, file{body: h.config, contentType: "application/json"})
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, Path+"/assets/"); ok {
		version, name, _ := strings.Cut(rest, "/")
		f, found := h.assets[name]
		if version != h.version || !found {
			// An asset of another build (or none): never answer index.html for a script.
			hd.Set("Cache-Control", "no-store")
			writeProblem(w, r, problem.NotFound("console asset %s not found (this server serves version %s)", rest, h.version))
			return
		}
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
		serve(w, r, f)
		return
	}
	hd.Set("Cache-Control", "no-cache")
	serve(w, r, h.index)
}

// serve writes f, gzip-compressed when the client accepts it.
func serve(w http.ResponseWriter, r *http.Request, f file) {
	hd := w.Header()
	hd.Set("Content-Type", f.contentType)
	hd.Add("Vary", "Accept-Encoding")
	body := f.body
	if f.gzipped != nil && acceptsGzip(r) {
		hd.Set("Content-Encoding", "gzip")
		body = f.gzipped
	}
	hd.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// acceptsGzip reports whether the request's Accept-Encoding lists gzip with a non-zero weight.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// writeProblem writes e as an RFC 9457 problem document.
func writeProblem(w http.ResponseWriter, r *http.Request, e *problem.Error) {
	b, err := json.Marshal(e.Doc(r.URL.Path, ""))
	if err != nil {
		http.Error(w, e.Detail, e.Status)
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(e.Status)
	w.Write(append(b, '\n'))
}
