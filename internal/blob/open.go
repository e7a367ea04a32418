package blob

import (
	"fmt"
	"net/url"
	"strings"
)

// Open opens the store a URL names: file:///path (or a plain path) for a local directory, or an
// s3:// URL (ParseS3URL) whose credentials getenv gives (S3CredentialsFromEnv). It reaches no
// server; its errors never repeat credentials.
func Open(raw string, getenv func(string) string) (Store, error) {
	scheme, _, found := strings.Cut(raw, "://")
	switch {
	case raw == "":
		return nil, fmt.Errorf("blob store: empty URL")
	case !found:
		return OpenDir(raw)
	case scheme == "file":
		u, err := url.Parse(raw)
		if err != nil || u.Host != "" || u.Path == "" {
			return nil, fmt.Errorf("blob store: want file:///absolute/path, got %q", raw)
		}
		return OpenDir(u.Path)
	case scheme == "s3":
		cfg, err := ParseS3URL(raw)
		if err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
		creds, err := S3CredentialsFromEnv(getenv)
		if err != nil {
			return nil, fmt.Errorf("blob store %s: %w", cfg, err)
		}
		return OpenS3(cfg, creds)
	default:
		return nil, fmt.Errorf("blob store: scheme %q: want file:// or s3://", scheme)
	}
}
