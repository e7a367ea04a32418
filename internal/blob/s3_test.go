package blob_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/blob/blobtest"
)

// TestS3Conformance runs the suite against the S3-compatible server of LARK_TEST_S3_URL (.ci/run
// starts one), with the credentials of the environment; every case under its own prefix.
func TestS3Conformance(t *testing.T) {
	t.Parallel()
	url := os.Getenv("LARK_TEST_S3_URL")
	if url == "" {
		t.Skip("LARK_TEST_S3_URL is not set: the S3 store's conformance suite needs an S3-compatible server (.ci/run starts one)")
	}
	st, err := blob.Open(url, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := st.List(ctx, "", "", 1); err != nil {
		t.Fatalf("LARK_TEST_S3_URL's server: %v", err)
	}
	// versitygw's posix backend removes the folders a DELETE leaves empty, up to the bucket, which
	// races with a PUT creating a file in one of them (it answers ObjectParentIsFile): an object
	// kept beside the cases' folders keeps their common folder from ever being empty.
	if err := st.Write(ctx, "blobtest/keep", strings.NewReader("keep"), 4); err != nil {
		t.Fatal(err)
	}
	blobtest.Run(t, func(*testing.T) blob.Store { return st })
}

func TestParseS3URL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want blob.S3Config
	}{
		{"s3://bkt", blob.S3Config{Bucket: "bkt", Endpoint: blob.DefaultS3Endpoint, Secure: true, Conditional: true}},
		{"s3://bkt/lark/prod/?region=eu-west-1", blob.S3Config{Bucket: "bkt", Prefix: "lark/prod/", Endpoint: blob.DefaultS3Endpoint, Region: "eu-west-1", Secure: true, Conditional: true}},
		{"s3://b/p?endpoint=127.0.0.1:7070&secure=false&conditional=false", blob.S3Config{Bucket: "b", Prefix: "p/", Endpoint: "127.0.0.1:7070", Conditional: false}},
	} {
		got, err := blob.ParseS3URL(tc.url)
		if err != nil || got != tc.want {
			t.Errorf("ParseS3URL(%q) = %+v, %v; want %+v", tc.url, got, err, tc.want)
		}
		again, err := blob.ParseS3URL(got.String())
		if err != nil || again != got {
			t.Errorf("ParseS3URL(%q) (String) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}
	for _, bad := range []string{"s3://", "s3:///p", "http://b", "s3://b/a/../c", "s3://b?endpoint=", "s3://b?secure=maybe", "s3://b?other=1", "s3://b?endpoint=h/x"} {
		if _, err := blob.ParseS3URL(bad); err == nil {
			t.Errorf("ParseS3URL(%q): no error", bad)
		}
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, u := range []string{dir + "/plain", "file://" + dir + "/url"} {
		st, err := blob.Open(u, noEnv)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if _, ok := st.(*blob.Dir); !ok {
			t.Fatalf("Open(%q) = %T, want *blob.Dir", u, st)
		}
		_ = st.Close()
	}
	for _, bad := range []string{"", "gs://b", "file://host/x", "file://", "s3://b"} { // s3: no credentials
		if _, err := blob.Open(bad, noEnv); err == nil {
			t.Errorf("Open(%q): no error", bad)
		}
	}
}

func noEnv(string) string { return "" }

// The credentials never appear in an error, in the store's String or in a log line about it:
// not when they are misplaced in the URL, not when the server cannot be reached, not when it
// refuses them.
func TestS3CredentialsNeverShown(t *testing.T) {
	t.Parallel()
	const access, secret = "AKIAEXAMPLEACCESS", "s3cr3t-Very-Secret-Value"
	env := func(k string) string {
		return map[string]string{"LARK_S3_ACCESS_KEY": access, "LARK_S3_SECRET_KEY": secret}[k]
	}
	var texts []string
	_, err := blob.Open("s3://"+access+":"+secret+"@bkt/p", env)
	texts = append(texts, fmt.Sprint(err))
	_, err = blob.Open("s3://bkt/p?endpoint=x&access_key="+secret, env)
	texts = append(texts, fmt.Sprint(err))
	_, err = blob.S3CredentialsFromEnv(func(k string) string { return map[string]string{"LARK_S3_SECRET_KEY": secret}[k] })
	texts = append(texts, fmt.Sprint(err))
	creds, _ := blob.S3CredentialsFromEnv(env)
	texts = append(texts, fmt.Sprint(creds), fmt.Sprintf("%+v %#v", creds, creds))

	// A port nothing listens on (a listener closed at once), and, when set, the test server with
	// wrong credentials.
	urls := []string{"s3://bkt/p?endpoint=127.0.0.1:1&secure=false"}
	if u := os.Getenv("LARK_TEST_S3_URL"); u != "" {
		urls = append(urls, u)
	}
	for _, u := range urls {
		st, err := blob.Open(u, env)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		slog.New(slog.NewTextHandler(&logs, nil)).Info("blob store", "store", st)
		texts = append(texts, fmt.Sprint(st), logs.String())
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, _, rerr := st.Read(ctx, "k", 1)
		_, serr := st.Stat(ctx, "k")
		_, lerr := st.List(ctx, "", "", 1)
		errs := map[string]error{"Write": st.Write(ctx, "k", strings.NewReader("x"), 1), "Create": st.Create(ctx, "k", strings.NewReader("x"), 1),
			"Delete": st.Delete(ctx, "k"), "Copy": st.Copy(ctx, "k", "l"), "Read": rerr, "Stat": serr, "List": lerr}
		cancel()
		for op, err := range errs {
			if err == nil {
				t.Errorf("%s: %s with wrong credentials succeeded", u, op)
			}
			texts = append(texts, fmt.Sprint(err), fmt.Sprintf("%+v", err))
		}
	}
	for _, text := range texts {
		if strings.Contains(text, secret) || strings.Contains(text, access) {
			t.Errorf("credentials shown: %s", text)
		}
	}
}
