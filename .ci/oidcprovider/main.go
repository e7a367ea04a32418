// Command oidcprovider is the OpenID provider Lark's CI signs in against: ZITADEL's OIDC library
// (github.com/zitadel/oidc/v3, its op package) with the library's example login pages and
// in-memory storage, set up the way Lark's identity tests need it:
//
//   - an https issuer on 127.0.0.1, with a certificate from a CA made at start and written to
//     DIR/ca.pem (the tests, the lark binary through SSL_CERT_FILE, and Chromium trust it);
//   - users whose ID tokens and JWT access tokens carry a tenant claim and group claims;
//   - public clients: lark-cli (device authorization grant and refresh tokens), lark-console
//     (authorization code with PKCE, redirected to /console/oidc/callback on any loopback port),
//     other-app (device grant: an audience Lark is not registered for);
//   - signing keys rotated by POST /admin/rotate: the new key signs from then on, the last three
//     stay published at /keys (served with Cache-Control: max-age=300).
//
// It writes its issuer URL to DIR/issuer once it accepts connections, and serves until killed.
// The users and their passwords are in users.go; every password is "<user>-password".
package main

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dir := flag.String("dir", "", "directory for ca.pem and issuer (required)")
	flag.Parse()
	if err := run(*addr, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider:", err)
		os.Exit(1)
	}
}

func run(addr, dir string) error {
	if dir == "" {
		return errors.New("-dir is required")
	}
	cert, caPEM, err := newCertificates()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), caPEM, 0o644); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	issuer := "https://" + ln.Addr().String()
	keys, err := newKeyring()
	if err != nil {
		return err
	}
	st := &store{Storage: storage.NewStorageWithClients(userStore{}, placeholderClients()), keys: keys}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, st, logger, false)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admin/rotate", func(w http.ResponseWriter, _ *http.Request) {
		b, err := json.Marshal(map[string]string{"kid": keys.rotate()})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	// Browsers ask for it on the login pages; an error there would fail the console's browser tests.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.Handle("/", cacheKeys(router))
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	if err := os.WriteFile(filepath.Join(dir, "issuer"), []byte(issuer+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "oidcprovider: serving", issuer)
	return srv.ServeTLS(ln, "", "")
}

// cacheKeys serves the key set with a cache lifetime, as hosted providers do, so that a relying
// party keeps keys between requests and must refresh on a kid it does not know.
func cacheKeys(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/keys" {
			w.Header().Set("Cache-Control", "public, max-age=300")
		}
		next.ServeHTTP(w, r)
	})
}

// store is the example's in-memory storage with this provider's clients, users' claims and
// rotating keys.
type store struct {
	*storage.Storage
	keys *keyring
}
