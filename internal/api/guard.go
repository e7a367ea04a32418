package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/bulklane"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

// DefaultMaxInFlight is the default cap on one tenant's requests in flight at once.
const DefaultMaxInFlight = 64

// DefaultMaxInFlightBytes is the default cap on the request bodies one tenant has in flight at
// once, by their declared length: 16 MiB, sixteen bodies of the default --max-body.
const DefaultMaxInFlightBytes = 16 << 20

// DefaultWriteTimeout is the default time the server gives a handler to answer, counted from the
// end of the request's headers; the sync invocation route lifts it while the call runs.
const DefaultWriteTimeout = 60 * time.Second

// DefaultBulkBytes is the default Config.BulkBytes: bodies over 64 KiB are bulky.
const DefaultBulkBytes = 64 << 10

// DefaultBulkWait is the default Config.BulkWait.
const DefaultBulkWait = 30 * time.Second

// operatorKey is the in-flight key of the platform operator's token (it has no tenant).
const operatorKey = "\x00operator"

// tenantKey is whom a request's in-flight counts and bulk lane belong to: its tenant, or the
// platform operator's token as a tenant of its own.
func tenantKey(sc auth.SecurityContext) string {
	if sc.Operator {
		return operatorKey
	}
	return sc.TenantID
}

// inFlight counts the requests, and the bytes of their bodies, in flight per tenant.
type inFlight struct {
	mu       sync.Mutex
	max      int
	maxBytes int64 // <= 0: no cap
	n        map[string]int
	bytes    map[string]int64
}

// acquire takes a slot and bytes for key; it refuses (and says which cap) when key already has
// max requests in flight, or when bytes would take key's bodies in flight past maxBytes (a request
// with no other body in flight is admitted whatever its size: --max-body bounds it).
func (f *inFlight) acquire(key string, bytes int64) (ok, overBytes bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[key] >= f.max {
		return false, false
	}
	if held := f.bytes[key]; f.maxBytes > 0 && bytes > 0 && held > 0 && held+bytes > f.maxBytes {
		return false, true
	}
	f.n[key]++
	if bytes > 0 {
		f.bytes[key] += bytes
	}
	return true, false
}

func (f *inFlight) release(key string, bytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[key]--; f.n[key] <= 0 {
		delete(f.n, key)
	}
	if bytes > 0 {
		if f.bytes[key] -= bytes; f.bytes[key] <= 0 {
			delete(f.bytes, key)
		}
	}
}

// limitInFlight (after authenticate) caps the requests one tenant has in flight at once (the
// platform operator's token counts as one tenant), and the bytes of their bodies: over
// Config.MaxInFlight, or Config.MaxInFlightBytes, it answers 429 rate_limited with Retry-After: 1,
// before the body is read. The request's writes are queued with its tenant's and weighed by its
// body (store.WithWriteWeight).
func (s *Server) limitInFlight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := tenantKey(security(r))
		weight := s.bodyWeight(r)
		if ok, overBytes := s.inflight.acquire(key, weight); !ok {
			pe := problem.New(problem.TypeRateLimited, "too many requests in flight for this tenant (at most %d at once)", s.cfg.MaxInFlight)
			if overBytes {
				pe = problem.New(problem.TypeRateLimited, "too many request bytes in flight for this tenant (at most %d at once)", s.cfg.MaxInFlightBytes)
			}
			pe.RetryAfter = 1
			s.problem(w, r, pe)
			return
		}
		defer s.inflight.release(key, weight)
		next.ServeHTTP(w, r.WithContext(store.WithWriteWeight(r.Context(), key, weight)))
	})
}

// bodyWeight is what r's writes weigh for the store's writer: its body's declared length, or
// Config.MaxBody when the length is not declared (a chunked body may be that long).
func (s *Server) bodyWeight(r *http.Request) int64 {
	if r.ContentLength < 0 {
		return s.cfg.MaxBody
	}
	return r.ContentLength
}

// need (after authenticate) answers 403 to a caller without role before the handler reads the
// body; what names the action in the detail. The services check again.
func (s *Server) need(role auth.Role, what string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := requireRole(security(r), role, what); err != nil {
				s.problem(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// tenantAdmin (after authenticate) admits the platform operator to the tenant-changing routes
// before their body is read: a tenant token gets 404 for another tenant (no existence leak) and
// 403 for its own, as the tenancy service answers.
func (s *Server) tenantAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := security(r)
		if !sc.Operator {
			id := chi.URLParam(r, "tenant_id")
			if sc.TenantID != id {
				s.problem(w, r, problem.NotFound("tenant %s not found", id))
				return
			}
			s.problem(w, r, problem.Forbidden("only the platform operator changes tenant enablement and policy"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// liftDeadlines removes the read and write deadlines of r's connection: the sync invocation route
// calls it once the body is read, because the call may legitimately run for its entrypoint's
// timeout_seconds. rearm sets the write deadline again (WriteTimeout from now) before the answer
// is written, so a client that stops reading still cannot hold the connection.
func (s *Server) liftDeadlines(w http.ResponseWriter, r *http.Request) (rearm func()) {
	rc := http.NewResponseController(w)
	s.deadline(r, rc.SetReadDeadline(time.Time{}))
	s.deadline(r, rc.SetWriteDeadline(time.Time{}))
	return func() { s.deadline(r, rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))) }
}

// deadline logs a failure to change a connection deadline (a writer without deadlines, such as a
// test recorder, and a connection already closed are not failures).
func (s *Server) deadline(r *http.Request, err error) {
	if err != nil && !errors.Is(err, http.ErrNotSupported) && !errors.Is(err, net.ErrClosed) {
		obs.Logger(r.Context()).WarnContext(r.Context(), "setting a connection deadline", "err", err)
	}
}

// bulkLane (after limitInFlight) serves a tenant's bulky requests (Config.BulkBytes) one at a
// time, in arrival order, before their bodies are read: however many large bodies one tenant
// sends at once, checking, decoding and encoding them occupies one core, and the other tenants'
// requests never wait for them. A request that cannot enter within Config.BulkWait answers 429
// rate_limited with Retry-After: 1. The hold travels in the request's context: an invocation
// start gives the lane up while its call is admitted and runs (bulklane.Pause).
func (s *Server) bulkLane(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.BulkBytes < 0 || (r.ContentLength >= 0 && r.ContentLength <= s.cfg.BulkBytes) {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.BulkWait)
		h, err := s.bulk.Enter(ctx, tenantKey(security(r)))
		cancel()
		if err != nil {
			if r.Context().Err() != nil {
				return // the client went away
			}
			pe := problem.New(problem.TypeRateLimited, "too many large requests queued for this tenant: none could start within %v", s.cfg.BulkWait)
			pe.RetryAfter = 1
			s.problem(w, r, pe)
			return
		}
		defer h.Leave()
		next.ServeHTTP(w, r.WithContext(bulklane.With(r.Context(), h)))
	})
}
