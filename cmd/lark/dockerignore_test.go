package main

import (
	"bufio"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDockerignore: the Dockerfile's build context (../../.dockerignore) leaves everything out
// and lets the module's sources back in. Every file `go build ./cmd/lark` reads from this module
// (Go files and embedded files of each package it builds from, go.mod, go.sum) must be let back in
// and not left out again, and what lark dev writes (its data directory with the master key and the
// dev tokens) must stay out wherever it is. The patterns are read with the rules Docker applies to
// the forms this file uses: "*", "!DIR/" and "**/NAME" (NAME a glob of one path element).
func TestDockerignore(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	defer f.Close()
	var patterns []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, patterns)
	require.Equal(t, "*", patterns[0], "the context starts empty; sources are let back in by name")

	sent := func(file string) bool { return dockerSends(patterns, file) }
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goTool, "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`, "./cmd/lark")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	files := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		dir, err := filepath.Rel(root, fields[0])
		require.NoError(t, err)
		for _, name := range fields[1:] {
			files = append(files, filepath.ToSlash(filepath.Join(dir, name)))
		}
	}
	require.Greater(t, len(files), 100, "go list found too few files of cmd/lark: %q", out)
	for _, file := range files {
		require.True(t, sent(file), "%s is needed by go build ./cmd/lark but .dockerignore leaves it out", file)
	}

	for _, secret := range []string{"lark-data/master.key", "lark-data/lark.db", "lark-data/dev-credentials.json",
		"cmd/lark/lark-data/lark.db-wal", "internal/x/master.key", "master.key", "lark", "Dockerfile", ".git/config",
		"internal/cli/cli.test", "backup.tar.gz", "dist/SHA256SUMS"} {
		require.False(t, sent(secret), "%s would be sent to the Docker daemon", secret)
	}
}

// dockerSends reports whether file (slash-separated, relative to the context) is sent: the last
// pattern that matches it or one of its parent directories decides.
func dockerSends(patterns []string, file string) bool {
	sent := true
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = path.Clean(strings.TrimPrefix(p, "!"))
		if dockerMatch(p, file) {
			sent = neg
		}
	}
	return sent
}

// dockerMatch reports whether pattern p matches file or one of its parent directories.
func dockerMatch(p, file string) bool {
	elems := strings.Split(file, "/")
	for i := 1; i <= len(elems); i++ {
		prefix := strings.Join(elems[:i], "/")
		if name, ok := strings.CutPrefix(p, "**/"); ok {
			if m, _ := path.Match(name, elems[i-1]); m {
				return true
			}
			continue
		}
		if m, _ := path.Match(p, prefix); m {
			return true
		}
	}
	return false
}
