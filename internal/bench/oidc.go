package bench

// The sync-oidc scenario: the sync invocation of `sync`, sent once with a Lark token and once with
// a JWT of an OIDC issuer (an in-process one, its keys cached by the server after the first
// request), to the same server; the ratio is what verifying the JWT costs on the hot path.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// SyncOIDCRatioGoal is the goal of sync-oidc: req/s with an OIDC token ÷ req/s with a Lark token ≥.
const SyncOIDCRatioGoal = 0.90

// benchIssuer is an in-process OIDC issuer over TLS whose certificate the server child trusts
// through SSL_CERT_FILE.
type benchIssuer struct {
	srv      *httptest.Server
	key      *rsa.PrivateKey
	certFile string
}

// startIssuer starts an issuer with one RSA key and writes its certificate to dir.
func startIssuer(dir string) (*benchIssuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	i := &benchIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"issuer": i.srv.URL, "jwks_uri": i.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "bench", Algorithm: "RS256", Use: "sig"}}})
	})
	i.srv = httptest.NewTLSServer(mux)
	i.certFile = filepath.Join(dir, "issuer.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.srv.Certificate().Raw})
	if err := os.WriteFile(i.certFile, cert, 0o600); err != nil {
		i.srv.Close()
		return nil, err
	}
	return i, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// token signs an hour-long token of subject bench in BenchTenant, group bench-admins.
func (i *benchIssuer) token() (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: i.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "bench"))
	if err != nil {
		return "", err
	}
	now := time.Now()
	claims, err := json.Marshal(map[string]any{"iss": i.srv.URL, "sub": "bench-oidc", "aud": "lark-bench",
		"tenant": BenchTenant, "groups": []string{"bench-admins"}, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// provider is the identity provider registration of the issuer.
func (i *benchIssuer) provider() []byte {
	return fmt.Appendf(nil, `{"issuer":%q,"audiences":["lark-bench"],"claims":{"subject":"sub","tenant":"tenant","roles":"groups"},`+
		`"role_mapping":{"bench-admins":"admin"},"description":"lark bench"}`, i.srv.URL)
}

// SyncOIDC runs the sync-oidc scenario.
func (r *Runner) SyncOIDC(ctx context.Context) Scenario {
	s := Scenario{Name: "sync-oidc", Status: StatusOK, Unit: "req/s"}
	o := r.Opts
	dir, err := os.MkdirTemp("", "lark-bench-issuer-")
	if err != nil {
		return failed(s, err)
	}
	defer os.RemoveAll(dir)
	iss, err := startIssuer(dir)
	if err != nil {
		return failed(s, fmt.Errorf("start the issuer: %w", err))
	}
	defer iss.srv.Close()
	l, err := r.startLarkEnv(ctx, "sync-oidc", o.Clients, []string{"SSL_CERT_FILE=" + iss.certFile})
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	jwt, err := r.prepareSyncOIDC(ctx, l, iss)
	if err != nil {
		return failed(s, err)
	}
	outer := newWindow(l.Pid(), nil) // the machine's load over the four windows
	outer.open()
	lk, oi := r.syncOIDCWindows(ctx, l, jwt)
	outer.close()
	s.MachineLoad = outer.machineLoad()
	usage, stopErr := l.stop()
	s.Process = &usage
	s.Baseline = &Baseline{Name: "sync with a Lark token", Unit: "req/s", Throughput: lk.Throughput, Latency: &lk.Latency}
	return r.finishSyncOIDC(s, lk, oi, stopErr)
}

// SyncOIDCDetail is sync-oidc's breakdown: the windows' figures per token and the server's CPU
// per request with each.
type SyncOIDCDetail struct {
	// Windows is how many measured windows each token had (in the order Lark, OIDC, OIDC, Lark).
	Windows int `json:"windows_per_token"`
	// LarkCPUPerReqMs and OIDCCPUPerReqMs are the server's CPU over each token's windows ÷ its
	// requests, in ms; CPURatio is OIDC's ÷ Lark's.
	LarkCPUPerReqMs float64 `json:"lark_cpu_ms_per_request"`
	OIDCCPUPerReqMs float64 `json:"oidc_cpu_ms_per_request"`
	CPURatio        float64 `json:"cpu_ratio"`
}

// oidcSide sums one token's windows.
type oidcSide struct {
	LoadResult
	cpuS float64
}

// add sums a window into the side: requests, errors, window time and server CPU; the latency kept
// is the first window's.
func (o *oidcSide) add(res LoadResult, cpuS float64) {
	if o.Window == 0 {
		o.Latency = res.Latency
	}
	o.Requests += res.Requests
	o.Errors += res.Errors
	o.ErrorSamples = append(o.ErrorSamples, res.ErrorSamples...)
	o.Window += res.Window
	o.cpuS += cpuS
	if o.Window > 0 {
		o.Throughput = float64(o.Requests) / o.Window.Seconds()
	}
}

// syncOIDCWindows runs sync's closed loop in four windows of half --duration each, with the Lark
// token, the JWT, the JWT and the Lark token again (ABBA: a drift of the shared machine falls on
// both sides alike), reading the server's CPU over each.
func (r *Runner) syncOIDCWindows(ctx context.Context, l *lark, jwt string) (lk, oi oidcSide) {
	o := r.Opts
	for i, name := range []string{"lark", "oidc", "oidc", "lark"} {
		token, side := l.token, &lk
		if name == "oidc" {
			token, side = jwt, &oi
		}
		r.logf("sync-oidc: window %d, %s token, %d clients, %v warm-up + %v", i+1, name, o.Clients, o.Warmup, o.Duration/2)
		win := newWindow(l.Pid(), nil)
		res := Load{Workers: o.Clients, Warmup: o.Warmup, Duration: o.Duration / 2, Mark: win.mark,
			Do: func(ctx context.Context) error { return l.api.InvokeSync(ctx, token, TaxSyncRequest) }}.Run(ctx)
		cpu, _ := win.serverCPU()
		side.add(res, cpu)
	}
	return lk, oi
}

// prepareSyncOIDC registers the issuer and calculate_tax and checks the JWT is accepted.
func (r *Runner) prepareSyncOIDC(ctx context.Context, l *lark, iss *benchIssuer) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, _, err := l.api.Call(sctx, http.MethodPost, "/identity-providers", l.operator, iss.provider(), http.StatusCreated); err != nil {
		return "", fmt.Errorf("register the issuer: %w", err)
	}
	if err := l.api.Register(sctx, l.token, UnlimitedTaxDefinition(TaxID)); err != nil {
		return "", fmt.Errorf("register calculate_tax: %w", err)
	}
	if err := l.api.Activate(sctx, l.token, TaxID); err != nil {
		return "", fmt.Errorf("activate calculate_tax: %w", err)
	}
	jwt, err := iss.token()
	if err != nil {
		return "", err
	}
	// The first request fetches the issuer's keys; the measured ones find them cached.
	if err := l.api.InvokeSync(sctx, jwt, TaxSyncRequest); err != nil {
		return "", fmt.Errorf("a sync invocation with the OIDC token: %w", err)
	}
	return jwt, nil
}

// finishSyncOIDC fills the scenario's figures and goal from the two sides.
func (r *Runner) finishSyncOIDC(s Scenario, base, res oidcSide, stopErr error) Scenario {
	s.Throughput, s.Latency = res.Throughput, &res.Latency
	s.Errors, s.ErrorSamples = res.Errors+base.Errors, append(base.ErrorSamples, res.ErrorSamples...)
	if base.Throughput > 0 {
		s.Ratio = res.Throughput / base.Throughput
	}
	if base.Latency.P99Ms > 0 {
		s.P99Ratio = res.Latency.P99Ms / base.Latency.P99Ms
	}
	d := &SyncOIDCDetail{Windows: 2}
	if base.Requests > 0 && res.Requests > 0 {
		d.LarkCPUPerReqMs, d.OIDCCPUPerReqMs = base.cpuS*1000/float64(base.Requests), res.cpuS*1000/float64(res.Requests)
	}
	if d.LarkCPUPerReqMs > 0 {
		d.CPURatio = d.OIDCCPUPerReqMs / d.LarkCPUPerReqMs
	}
	note := ""
	if isPostgres(r.Opts.Store) {
		note = "n/a: not read per token (the windows alternate)"
	}
	s.CPU = NewCPUPerUnit("request", res.Requests, res.cpuS, nil, note)
	s.CPU.Compare(d.LarkCPUPerReqMs, "the server's CPU per request with a Lark token")
	if s.Baseline != nil {
		s.Baseline.CPUPerUnitMs = d.LarkCPUPerReqMs
	}
	s.SyncOIDC = d
	s.Goals = []Goal{{Name: "ratio", Target: fmt.Sprintf("≥ %.2f", SyncOIDCRatioGoal), Value: s.Ratio, Met: s.Ratio >= SyncOIDCRatioGoal}}
	s.Result = goalsResult(s.Goals)
	switch {
	case s.Errors > 0:
		s = failed(s, fmt.Errorf("%d sync invocations failed", s.Errors))
	case stopErr != nil:
		s = failed(s, stopErr)
	case res.Requests == 0 || base.Requests == 0:
		s = failed(s, errors.New("no request completed in a measured window"))
	}
	r.logf("sync-oidc: %s with an OIDC token, %s with a Lark token (ratio %.3f), p99 %s vs %s; server CPU per request %s vs %s (%.3f)",
		rate(res.Throughput, "req/s"), rate(base.Throughput, "req/s"), s.Ratio, msCell(res.Latency.P99Ms), msCell(base.Latency.P99Ms),
		msCell(d.OIDCCPUPerReqMs), msCell(d.LarkCPUPerReqMs), d.CPURatio)
	return s
}
