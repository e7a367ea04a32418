package api_test

// Benchmarks of the registry's read paths over real HTTP (httptest server, keep-alive client), with
// a baseline: a bare handler writing a small fixed JSON document behind the same setup. Each
// registry benchmark also measures that baseline itself, before its timed loop, and reports its own
// throughput relative to it (x_vs_echo), so the ratio is comparable across machines.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	benchEntrypoints = 100  // entrypoints registered for the registry benchmarks
	echoWarmRequests = 2000 // requests of the in-benchmark echo measurement
)

var echoDoc = []byte(`{"id":"ep_01a1fd7162957057b4a7301f87ce6d47","status":"active","title":"Calculate Tax","version":"1.0.0"}` + "\n")

func echoHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(echoDoc)
}

// benchClient is a keep-alive client able to hold one idle connection per parallel goroutine.
func benchClient(ts *httptest.Server) *http.Client {
	tr := ts.Client().Transport.(*http.Transport).Clone()
	n := 4 * runtime.GOMAXPROCS(0)
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = n, n, 0
	tr.DisableKeepAlives = false
	return &http.Client{Transport: tr}
}

// get performs one GET and drains the body so that the connection is reused.
func get(c *http.Client, url, token string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, res.StatusCode)
	}
	return nil
}

// runParallel runs the timed loop with b.RunParallel and reports req/s.
func runParallel(b *testing.B, c *http.Client, token string, url func(i int64) string) float64 {
	b.Helper()
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := get(c, url(n.Add(1)), token); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	rps := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rps, "req/s")
	return rps
}

// echoThroughput starts the echo baseline behind the same httptest + client setup and measures its
// req/s over total requests, with as many concurrent callers as RunParallel uses.
func echoThroughput(b *testing.B, total int) float64 {
	b.Helper()
	ts := httptest.NewServer(http.HandlerFunc(echoHandler))
	defer ts.Close()
	c := benchClient(ts)
	defer c.CloseIdleConnections()
	workers := runtime.GOMAXPROCS(0)
	// Warm the connections first so the measurement is of keep-alive requests.
	for i := 0; i < workers; i++ {
		if err := get(c, ts.URL, ""); err != nil {
			b.Fatal(err)
		}
	}
	var left atomic.Int64
	left.Store(int64(total))
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := get(c, ts.URL, ""); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return float64(total) / elapsed.Seconds()
}

// registryFixture starts a real server with one tenant and benchEntrypoints registered entrypoints; it
// returns the server, a viewer token and the entrypoints' opaque ids.
func registryFixture(b *testing.B) (*env, string, []string) {
	b.Helper()
	e := newEnv(b)
	adm := e.tenant(b, "bench")
	ids := make([]string, 0, benchEntrypoints)
	for i := 0; i < benchEntrypoints; i++ {
		ep := e.register(b, adm, fnNamed(b, fmt.Sprintf("bench.fn_%03d.v1~", i)))
		ids = append(ids, idOf(ep))
	}
	return e, e.token(b, "bench", "reader", "viewer"), ids
}

// BenchmarkEchoJSON is the baseline: a bare handler writing a small fixed JSON document.
func BenchmarkEchoJSON(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(echoHandler))
	defer ts.Close()
	c := benchClient(ts)
	defer c.CloseIdleConnections()
	runParallel(b, c, "", func(int64) string { return ts.URL })
}

// BenchmarkRegistryGet measures GET /entrypoints/{id} (authentication, visibility-scoped lookup and
// rendering) round-robin over 100 entrypoints.
func BenchmarkRegistryGet(b *testing.B) {
	e, tok, ids := registryFixture(b)
	echo := echoThroughput(b, echoWarmRequests)
	c := benchClient(e.ts)
	defer c.CloseIdleConnections()
	urls := make([]string, len(ids))
	for i, id := range ids {
		urls[i] = e.ts.URL + epPath(id)
	}
	rps := runParallel(b, c, tok, func(i int64) string { return urls[i%int64(len(urls))] })
	b.ReportMetric(rps/echo, "x_vs_echo")
}

// BenchmarkRegistryList measures GET /entrypoints?limit=25 over 100 entrypoints.
func BenchmarkRegistryList(b *testing.B) {
	e, tok, _ := registryFixture(b)
	echo := echoThroughput(b, echoWarmRequests)
	c := benchClient(e.ts)
	defer c.CloseIdleConnections()
	url := e.ts.URL + base + "/entrypoints?limit=25"
	rps := runParallel(b, c, tok, func(int64) string { return url })
	b.ReportMetric(rps/echo, "x_vs_echo")
}
