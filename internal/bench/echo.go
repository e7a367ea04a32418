package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// EchoServingMsg is the log message with which `lark bench-echo` announces its address.
const EchoServingMsg = "lark bench-echo serving"

// EchoDocument is what the echo baseline answers: a copy of a real answer of Lark to the sync
// calculate_tax invocation (ids and times from one run), so that both sides of the sync
// comparison move the same bytes.
var EchoDocument = []byte(`{"record":{"invocation_id":"inv_01a1fdb68a747606b1a6ff624c12a0bf","entrypoint_id":"` + TaxID + `","entrypoint_version":"1.0.0","tenant_id":"bench","status":"succeeded","mode":"sync","params":{"amount":100,"invoice_id":"inv_001"},"result":{"tax":10,"total":110.00000000000001},"error":null,"timestamps":{"created_at":"2026-11-21T10:46:01.076393Z","started_at":"2026-11-21T10:46:01.076393Z","suspended_at":null,"finished_at":"2026-11-21T10:46:01.07745Z"},"observability":{"correlation_id":"corr_01a1fdb68a737d49ac4512067c5c2179","trace_id":"480162f98fee5704f636a86f602ec850","span_id":"b70a6a560b3d65b6","metrics":{"duration_ms":0,"billed_duration_ms":1,"cpu_time_ms":0,"memory_limit_mb":128,"max_memory_used_mb":1,"step_count":21}},"attempt":1},"dry_run":false,"cached":false}
`)

// EchoHandler is the sync scenario's baseline: a bare Go JSON handler. Any POST: read the body,
// check that it is JSON, answer EchoDocument.
func EchoHandler() http.Handler { return echoWith(nil) }

// echoWith is EchoHandler that, when write is set, hands it the body before answering (and
// answers 500 when it fails).
func echoWith(write func(ctx context.Context, body []byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, `{"status":405}`, http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"status":400}`, http.StatusBadRequest)
			return
		}
		if !json.Valid(body) {
			http.Error(w, `{"status":400,"detail":"not JSON"}`, http.StatusBadRequest)
			return
		}
		if write != nil {
			if err := write(r.Context(), body); err != nil {
				http.Error(w, `{"status":500}`, http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(EchoDocument)
	})
}

// ServeEcho serves EchoHandler on addr until ctx ends, announcing the address on log the way
// `lark serve` does (a JSON line with msg EchoServingMsg and addr), then shuts down gracefully.
// With durable set it serves a DurableEcho whose database is in that directory.
func ServeEcho(ctx context.Context, addr, durable string, log *slog.Logger) error {
	h := EchoHandler()
	if durable != "" {
		de, err := OpenDurableEcho(durable)
		if err != nil {
			return err
		}
		defer de.Close()
		h = de.Handler()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info(EchoServingMsg, "addr", ln.Addr().String())
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shutErr := hs.Shutdown(sctx)
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	log.Info("stopped")
	return errors.Join(serveErr, shutErr)
}
