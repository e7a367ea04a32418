package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/cutproxy"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// PostgreSQL cut mid-load (a TCP proxy between the server and PostgreSQL, cut and restored):
// while it is cut the API answers 503 with Retry-After, each within the bound, never hanging and
// never another error; once it is restored new requests are accepted again without a restart,
// and every invocation accepted (202) before, during or after the cut completes.
func TestPostgresCutAnswers503AndRecovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cuts PostgreSQL under load for a few seconds")
	}
	dbURL := pgtest.Schema(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	px := cutproxy.New(t, u.Host)
	u.Host = px.Addr()
	const writeWait = 2 * time.Second
	// Attempts whose outcome was being written when the connection was cut are run again when their
	// lease ends: the attempt's timeout (2 s here) plus the lease grace (2 s here; 30 s by default).
	e := newEnv(t, func(c *server.Config) {
		c.Store = u.String()
		c.StoreWriteWait = writeWait
		c.LeaseGrace = 2 * time.Second
	})
	invDispatcher(t, e)
	adm := e.tenant(t, "acme")
	e.registerActive(t, adm, fn(t, taxV1, del("traits.rate_limit"), set("traits.limits.timeout_seconds", 2)))

	// The bound of one answer while the store is down: the write wait plus the store's retries of
	// a refused connection (under a second) plus slack for a loaded machine.
	const answerBound = writeWait + 8*time.Second
	var (
		mu        sync.Mutex
		accepted  []string
		by        = map[int]int{}
		other     []string
		slowest   time.Duration
		stop      atomic.Bool
		n         atomic.Int64
		wg        sync.WaitGroup
		saw503    = make(chan struct{})
		once503   sync.Once
		client    = &http.Client{Timeout: 60 * time.Second}
		acceptedN atomic.Int64
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := n.Add(1)
				b := fmt.Appendf(nil, `{"entrypoint_id":%q,"mode":"async","params":{"invoice_id":"inv_%d","amount":100}}`, taxV1, i)
				req, _ := http.NewRequest(http.MethodPost, e.ts.URL+invPath, bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+adm)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				res, err := client.Do(req)
				took := time.Since(t0)
				if err != nil {
					mu.Lock()
					other = append(other, err.Error())
					mu.Unlock()
					continue
				}
				raw, _ := io.ReadAll(res.Body)
				res.Body.Close()
				mu.Lock()
				by[res.StatusCode]++
				slowest = max(slowest, took)
				switch res.StatusCode {
				case http.StatusAccepted:
					var body struct {
						Record struct {
							ID string `json:"invocation_id"`
						} `json:"record"`
					}
					if err := json.Unmarshal(raw, &body); err != nil || body.Record.ID == "" {
						other = append(other, "202 without a record: "+string(raw))
					} else {
						accepted = append(accepted, body.Record.ID)
						acceptedN.Add(1)
					}
				case http.StatusServiceUnavailable:
					if res.Header.Get("Retry-After") == "" || !bytes.Contains(raw, []byte("err.unavailable.v1~")) {
						other = append(other, "503 without Retry-After or the unavailable type: "+string(raw))
					}
					once503.Do(func() { close(saw503) })
				default:
					other = append(other, fmt.Sprintf("%d: %s", res.StatusCode, raw))
				}
				mu.Unlock()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()

	waitUntil(t, func() bool { return acceptedN.Load() >= 50 }, "50 invocations accepted before the cut")
	px.Cut()
	select {
	case <-saw503:
	case <-time.After(30 * time.Second):
		t.Fatal("no 503 within 30 s of the cut")
	}
	mu.Lock()
	before := acceptedN.Load()
	mu.Unlock()
	// Stay cut for a while: every answer meanwhile is a 503 (or a 202 that committed just before).
	time.Sleep(3 * time.Second) // the outage's length, not a wait for a condition
	px.Restore()
	waitUntil(t, func() bool { return acceptedN.Load() >= before+50 }, "50 more invocations accepted after the restore")
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	t.Logf("answers: %v; slowest %v; %d accepted", by, slowest, len(accepted))
	require.Empty(t, other[:min(len(other), 5)], "answers other than 202 and 503 (%d)", len(other))
	require.Less(t, slowest, answerBound, "an answer took longer than the bound")
	ids := append([]string(nil), accepted...)
	mu.Unlock()

	// Everything accepted completes: the pool reconnected and the dispatcher resumed by itself.
	deadline := time.Now().Add(3 * time.Minute)
	for _, id := range ids {
		for {
			r := e.do(t, http.MethodGet, invPath+"/"+id, adm, nil)
			if r.Status == http.StatusOK && r.Body["status"] == "succeeded" {
				break
			}
			require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, r.Status, "%s", r)
			if st, _ := r.Body["status"].(string); st == "failed" || st == "canceled" {
				t.Fatalf("invocation %s ended %s: %s", id, st, r)
			}
			require.True(t, time.Now().Before(deadline), "invocation %s did not complete after the restore: %s", id, r)
			time.Sleep(100 * time.Millisecond)
		}
	}
}
