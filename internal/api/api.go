// Package api is Lark's HTTP surface: routing (chi, with colon verbs), authentication, RFC 9457
// problem documents, request decoding and list parameters. It holds no business rules: handlers
// decode, call a domain service and encode.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/larkrun/lark/internal/api/openapi"
	"github.com/larkrun/lark/internal/assetops"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/bulklane"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/eventbus"
	"github.com/larkrun/lark/internal/eventtrigger"
	"github.com/larkrun/lark/internal/federation"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/registry"
	"github.com/larkrun/lark/internal/scheduler"
	"github.com/larkrun/lark/internal/secrets"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenancy"
	"github.com/larkrun/lark/internal/tokens"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/usage"
	"github.com/larkrun/lark/internal/webhookrecv"
	"github.com/larkrun/lark/internal/workerhub"
	"github.com/larkrun/lark/internal/workerproto"
)

// BasePath prefixes every API route.
const BasePath = "/api/serverless-runtime/v1"

// DefaultMaxBody is the default request body limit (bytes).
const DefaultMaxBody = 1 << 20

// Pinger reports whether the store is reachable and migrated (for /readyz).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config wires the API to its services.
type Config struct {
	Tokens   *tokens.Service
	Tenants  *tenancy.Service
	Registry *registry.Service
	Invoke   *invoke.Service
	Usage    *usage.Service
	// IdentityProviders serves the identity provider API (nil: its routes answer 503).
	IdentityProviders *federation.Service
	// Schedules serves the Schedule API.
	Schedules *scheduler.Service
	// Secrets serves the Secrets API.
	Secrets *secrets.Service
	// Assets serves the Assets API (nil: its routes answer 503).
	Assets *assetops.Service
	// Webhooks serves the Webhook Trigger API and the public receiver (nil: 503 on the API, 404
	// on the receiver).
	Webhooks *webhookrecv.Service
	// TrustedProxies are the proxies whose X-Forwarded-For the webhook receiver believes; from any
	// other peer, the TCP peer address is the sender's (allowed_sources).
	TrustedProxies []netip.Prefix
	// Events serves the events API (publishing, event types).
	Events *eventbus.Bus
	// Triggers serves the Trigger API.
	Triggers *eventtrigger.Service
	// WorkerHub serves the worker route group (docs/workers.md), authenticated by envelopes signed
	// with a key of WorkerKeys (both nil: the group is not mounted). WorkerClock checks envelope
	// expiry (nil: the real clock).
	WorkerHub   *workerhub.Service
	WorkerKeys  *workerproto.Keyset
	WorkerClock clock.Clock
	// WorkerNonces remembers the nonces of the worker envelopes that change something beyond a
	// restart (nil: in memory only, as heartbeats' always are).
	WorkerNonces NonceStore
	Audit        AuditLister
	Ready        Pinger
	IDs          idgen.Generator
	Logger       *slog.Logger
	MaxBody      int64
	// Metrics, when set, is served at GET /metrics: to the platform operator's token only, since it
	// names every tenant, unless MetricsPublic.
	Metrics       http.Handler
	MetricsPublic bool
	// StoreWriteWait bounds how long a request's write waits for the store's writer to start it
	// (0: store.DefaultWriteWait; negative: no bound); past it the request answers 503
	// unavailable with Retry-After.
	StoreWriteWait time.Duration
	// MaxInFlight caps one tenant's requests in flight at once (default DefaultMaxInFlight); over
	// it a request answers 429 rate_limited before its body is read.
	MaxInFlight int
	// MaxInFlightBytes caps the request bodies one tenant has in flight at once, by their declared
	// length (MaxBody for a body of undeclared length; default DefaultMaxInFlightBytes, negative: no
	// cap); over it a request answers 429 rate_limited before its body is read, unless it is the
	// tenant's only body in flight.
	MaxInFlightBytes int64
	// BulkBytes is the declared body length past which a request is bulky (a body of undeclared
	// length is too): a tenant's bulky requests are served one at a time (bulklane), so that its
	// JSON work occupies one core at most (default DefaultBulkBytes; negative: no lanes).
	// BulkWait bounds a bulky request's wait for its lane (default DefaultBulkWait); past it the
	// request answers 429 rate_limited with Retry-After.
	BulkBytes int64
	BulkWait  time.Duration
	// Bulk are the lanes bulky requests go through (nil: lanes of the server's own).
	Bulk *bulklane.Lanes
	// WriteTimeout is the http.Server's WriteTimeout (default DefaultWriteTimeout): the sync
	// invocation route lifts the deadline while the call runs and sets it again to this long
	// before writing the answer.
	WriteTimeout time.Duration
	// MaxPageBytes is the byte budget of a list page (default store.DefaultPageBytes): the store
	// ends a page before the item that would take it over (store.ListQuery.MaxBytes), and the
	// answer is written item by item, so a request holds at most about this much of a page.
	MaxPageBytes int
	// Tracing starts the requests' spans (nil: off; requests still get trace ids). HTTPMetrics
	// hears of every finished request (nil: none). AccessLogOff writes the access log lines at debug
	// instead of info. LogLevel, when set, is the level GET and PUT /admin/log-level read and change.
	Tracing      *tracing.Tracing
	HTTPMetrics  HTTPObserver
	AccessLogOff bool
	LogLevel     *slog.LevelVar
}

// Server serves the API.
type Server struct {
	cfg          Config
	workerNonces *workerproto.NonceCache
	log          *slog.Logger
	inflight     *inFlight
	bulk         *bulklane.Lanes
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.IDs == nil {
		cfg.IDs = idgen.UUIDv7{}
	}
	if cfg.StoreWriteWait == 0 {
		cfg.StoreWriteWait = store.DefaultWriteWait
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	cfg.MaxPageBytes = store.PageBytes(cfg.MaxPageBytes)
	if cfg.MaxInFlightBytes == 0 {
		cfg.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if cfg.BulkBytes == 0 {
		cfg.BulkBytes = DefaultBulkBytes
	}
	if cfg.BulkWait <= 0 {
		cfg.BulkWait = DefaultBulkWait
	}
	if cfg.Bulk == nil {
		cfg.Bulk = bulklane.New()
	}
	return &Server{cfg: cfg, log: cfg.Logger, bulk: cfg.Bulk, inflight: &inFlight{max: cfg.MaxInFlight, maxBytes: cfg.MaxInFlightBytes,
		n: map[string]int{}, bytes: map[string]int64{}},
		workerNonces: workerproto.NewNonceCache(0)}
}

// Handler returns the root handler: the middleware every request goes through, the answers to
// unknown routes and methods, the routes outside the base path, and the base path's routes.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.telemetry, s.recoverer, s.correlate, middleware.GetHead)
	s.fallbacks(r)
	s.rootRoutes(r)
	r.Route(BasePath, s.baseRoutes)
	return r
}

// fallbacks answers the requests r routes nowhere: 404 for an unknown path, 405 (with Allow) for
// a known path and an unsupported method.
func (s *Server) fallbacks(r chi.Router) {
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.problem(w, r, notFound(r))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 lists the methods the resource supports.
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if r.Match(chi.NewRouteContext(), m, req.URL.Path) {
				allowed = append(allowed, m)
			}
		}
		if slices.Contains(allowed, http.MethodGet) && !slices.Contains(allowed, http.MethodHead) {
			allowed = append(allowed, http.MethodHead)
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.problem(w, req, methodNotAllowed(req))
	})
}

// rootRoutes mounts the routes outside the authenticated base path: the probes, the OpenAPI
// document, the webhook receiver, the worker group and the metrics.
func (s *Server) rootRoutes(r chi.Router) {
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	// The OpenAPI document is public: it describes the API, not any tenant's data.
	r.Get(BasePath+"/openapi.json", openapi.ServeHTTP)
	// The webhook receiver authenticates deliveries itself (no bearer token): it sits beside the
	// authenticated base path, not inside it.
	s.receiverRoutes(r)
	s.workerRoutes(r)
	if s.cfg.Metrics != nil {
		if s.cfg.MetricsPublic {
			r.Method(http.MethodGet, "/metrics", s.cfg.Metrics)
		} else {
			r.With(s.authenticate, s.operatorOnly).Method(http.MethodGet, "/metrics", s.cfg.Metrics)
		}
	}
}

// baseRoutes mounts the authenticated routes under BasePath, resource by resource, behind the
// group's middleware.
func (s *Server) baseRoutes(r chi.Router) {
	// Authentication, the in-flight cap, the bulk lane and the role each route needs all run
	// before a handler reads the body: a caller that may not write cannot make the server wait
	// for one.
	r.Use(s.limitBody, s.authenticate, s.limitInFlight, s.bulkLane)
	s.tokenRoutes(r)
	s.identityProviderRoutes(r)
	s.tenantRoutes(r)
	s.entrypointRoutes(r)
	s.invocationRoutes(r)
	s.eventRoutes(r)
	r.Get("/audit-events", s.listAudit)
	s.logLevelRoutes(r)

	s.scheduleRoutes(r)
	s.backfillRoutes(r)
	s.secretRoutes(r)
	s.webhookRoutes(r)
	s.eventTypeRoutes(r)
	s.triggerRoutes(r)
	s.assetRoutes(r)
	s.workerListRoute(r)
}

// tokenRoutes mounts the token routes: issuing (admins only), listing, whoami and revoking.
func (s *Server) tokenRoutes(r chi.Router) {
	r.With(s.need(auth.RoleAdmin, "issuing tokens")).Post("/tokens", s.createToken)
	r.Get("/tokens", s.listTokens)
	r.Get("/whoami", s.whoami)
	r.Delete("/tokens/{token_id}", s.revokeToken)
}

// tenantRoutes mounts a tenant's runtime routes: enabling, its settings and policy (changed by
// tenant admins), and its usage.
func (s *Server) tenantRoutes(r chi.Router) {
	r.With(s.tenantAdmin).Post("/tenants/{tenant_id}/serverless-runtime:enable", s.enableTenant)
	r.With(s.tenantAdmin).Post("/tenants/{tenant_id}/serverless-runtime:disable", s.disableTenant)
	r.Get("/tenants/{tenant_id}/serverless-runtime", s.getTenant)
	r.With(s.tenantAdmin).Patch("/tenants/{tenant_id}/serverless-runtime", s.patchTenant)
	r.Get("/tenants/{tenant_id}/runtime-policy", s.getTenant)
	r.With(s.tenantAdmin).Put("/tenants/{tenant_id}/runtime-policy", s.putTenantPolicy)
	r.Get("/tenants/{tenant_id}/usage", s.tenantUsage)
	r.Get("/tenants/{tenant_id}/usage/history", s.tenantUsageHistory)
}

// entrypointRoutes mounts the entrypoint routes; the writes need a developer.
func (s *Server) entrypointRoutes(r chi.Router) {
	developer := func(what string) chi.Router { return r.With(s.need(auth.RoleDeveloper, what)) }
	developer("registering entrypoints").Post("/entrypoints", s.registerEntrypoint)
	developer("validating entrypoints").Post("/entrypoints:validate", s.validateEntrypoint)
	r.Get("/entrypoints", s.listEntrypoints)
	r.Get("/entrypoints/{id:[^:/]+}", s.getEntrypoint)
	developer("changing entrypoints").Put("/entrypoints/{id:[^:/]+}", s.updateEntrypoint)
	r.Delete("/entrypoints/{id:[^:/]+}", s.deleteEntrypoint)
	developer("changing entrypoints").Post("/entrypoints/{id:[^:/]+}:status", s.entrypointStatus)
	r.Post("/entrypoints/{id:[^:/]+}:validate", s.validateExisting)
	developer("planning DAGs").Post("/entrypoints/{id:[^:/]+}:plan", s.planEntrypoint)
	r.Get("/entrypoints/{id:[^:/]+}/versions", s.entrypointVersions)
}

// invocationRoutes mounts the invocation routes; starting and controlling need an operator.
func (s *Server) invocationRoutes(r chi.Router) {
	operator := func(what string) chi.Router { return r.With(s.need(auth.RoleOperator, what)) }
	operator("invoking entrypoints").Post("/invocations", s.startInvocation)
	r.Get("/invocations", s.listInvocations)
	r.Get("/invocations/{id:[^:/]+}", s.getInvocation)
	r.Get("/invocations/{id:[^:/]+}/timeline", s.invocationTimeline)
	r.Get("/invocations/{id:[^:/]+}/tasks", s.invocationTasks)
	operator("controlling invocations").Post("/invocations/{id:[^:/]+}:control", s.controlInvocation)
}

// eventRoutes mounts the event routes; publishing needs an operator.
func (s *Server) eventRoutes(r chi.Router) {
	r.With(s.need(auth.RoleOperator, "publishing events")).Post("/events", s.publishEvent)
	r.Get("/events", s.listEvents)
	r.Get("/events/{id:[^:/]+}", s.getEvent)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.Ready.Ping(ctx); err != nil {
		s.log.WarnContext(ctx, "not ready", "err", err)
		s.problem(w, r, problem.New(problem.TypeUnavailable, "not ready: the store is not reachable or migrations are pending"))
		return
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}
