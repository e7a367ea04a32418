package api

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/webhook"
	"github.com/larkrun/lark/internal/webhookrecv"
)

// webhookRoutes mounts the Webhook Trigger API (002) under the authenticated base path.
func (s *Server) webhookRoutes(r chi.Router) {
	w := r.With(s.need(auth.RoleDeveloper, "changing webhook triggers"))
	w.Post("/webhook-triggers", s.createWebhook)
	r.Get("/webhook-triggers", s.listWebhooks)
	r.Get("/webhook-triggers/{id:[^:/]+}", s.getWebhook)
	w.Put("/webhook-triggers/{id:[^:/]+}", s.replaceWebhook)
	w.Patch("/webhook-triggers/{id:[^:/]+}", s.patchWebhook)
	w.Delete("/webhook-triggers/{id:[^:/]+}", s.deleteWebhook)
	w.Post("/webhook-triggers/{id:[^:/]+}:enable", s.webhookStatus(webhook.StatusActive))
	w.Post("/webhook-triggers/{id:[^:/]+}:disable", s.webhookStatus(webhook.StatusDisabled))
	w.Post("/webhook-triggers/{id:[^:/]+}:regenerate-secret", s.regenerateWebhookSecret)
	r.Get("/webhook-triggers/{id:[^:/]+}/deliveries", s.webhookDeliveries)
}

// receiverRoutes mounts the public webhook receiver: no bearer token (the trigger's own
// authentication), but panic recovery, correlation id and access log (the root's middleware) and
// a body bound of its own (the largest max_body_bytes a trigger may have; each trigger's own is
// checked after it is found).
func (s *Server) receiverRoutes(r chi.Router) {
	path := BasePath + "/webhooks/{tenant_id}/{trigger_id}"
	r.With(s.limitWebhookBody).Post(path, s.receiveWebhook)
	// Any other method is 405 here, not the bearer-token group's 401: the receiver takes no token.
	notPost := func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		s.problem(w, req, problem.New(problem.TypeMethodNotAllowed, "method %s is not allowed on a webhook receiver; senders POST", req.Method))
	}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		r.MethodFunc(m, path, notPost)
	}
}

func (s *Server) webhooksOff() error {
	return problem.New(problem.TypeUnavailable, "webhook triggers are not configured on this server")
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, s.webhooksOff())
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var spec webhookrecv.Spec
	if err := decodeResource(r, &spec, webhookrecv.View{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	v, err := s.cfg.Webhooks.Create(r.Context(), security(r), spec)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/webhook-triggers/"+v.ID)
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusCreated, v)
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, s.webhooksOff())
		return
	}
	servePage(s, w, r, func(q store.ListQuery) (store.Page[webhookrecv.View], error) {
		return s.cfg.Webhooks.List(r.Context(), security(r), q)
	}, asIs)
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, s.webhooksOff())
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	v, err := s.cfg.Webhooks.Get(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, v, err)
}

func (s *Server) replaceWebhook(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, s.webhooksOff())
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var spec webhookrecv.Spec
	if err := decodeResource(r, &spec, webhookrecv.View{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	v, err := s.cfg.Webhooks.Replace(r.Context(), security(r), chi.URLParam(r, "id"), spec)
	w.Header().Set("Cache-Control", "no-store")
	s.respond(w, r, v, err)
}

func (s *Server) patchWebhook(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, s.webhooksOff())
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	patch, err := decodeObject(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	v, err := s.cfg.Webhooks.Patch(r.Context(), security(r), chi.URLParam(r, "id"), patch,
		func(b []byte, spec *webhookrecv.Spec) error { return decodeBody(b, spec, webhookrecv.View{}) })
	w.Header().Set("Cache-Control", "no-store")
	s.respond(w, r, v, err)
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, s.webhooksOff())
		return
	}
	if err := noBody(r); err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := s.cfg.Webhooks.Delete(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, out, err)
}

func (s *Server) webhookStatus(status webhook.Status) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Webhooks == nil {
			s.problem(w, r, s.webhooksOff())
			return
		}
		if err := noBody(r); err != nil {
			s.problem(w, r, err)
			return
		}
		v, err := s.cfg.Webhooks.SetStatus(r.Context(), security(r), chi.URLParam(r, "id"), status)
		s.respond(w, r, v, err)
	}
}

func (s *Server) regenerateWebhookSecret(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, s.webhooksOff())
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var req webhookrecv.Regenerate
	if err := decodeStruct(r, &req, true); err != nil {
		s.problem(w, r, err)
		return
	}
	v, err := s.cfg.Webhooks.RegenerateSecret(r.Context(), security(r), chi.URLParam(r, "id"), req)
	w.Header().Set("Cache-Control", "no-store")
	s.respond(w, r, v, err)
}

func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, s.webhooksOff())
		return
	}
	servePage(s, w, r, func(q store.ListQuery) (store.Page[webhook.Delivery], error) {
		return s.cfg.Webhooks.Deliveries(r.Context(), security(r), chi.URLParam(r, "id"), q)
	}, asIs)
}

// limitWebhookBody bounds a delivery's body at webhookrecv.MaxBodyBytes (413 before reading a
// larger announced one).
func (s *Server) limitWebhookBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > webhookrecv.MaxBodyBytes {
			s.problem(w, r, problem.New(problem.TypePayloadTooLarge, "the request body exceeds %d bytes", webhookrecv.MaxBodyBytes))
			return
		}
		r.Body = &trackedBody{ReadCloser: http.MaxBytesReader(w, r.Body, webhookrecv.MaxBodyBytes), empty: r.ContentLength == 0}
		next.ServeHTTP(w, r)
	})
}

// receiveWebhook is POST /webhooks/{tenant_id}/{trigger_id}: 202 {invocation_id, delivery_id}.
func (s *Server) receiveWebhook(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.problem(w, r, problem.NotFound("no webhook trigger at this address"))
		return
	}
	out, err := s.cfg.Webhooks.Receive(r.Context(), webhookrecv.Request{
		TenantID: chi.URLParam(r, "tenant_id"), TriggerID: chi.URLParam(r, "trigger_id"),
		Client: clientAddr(r, s.cfg.TrustedProxies), Header: r.Header, Query: r.URL.Query(),
		Body: r.Body, ContentLength: r.ContentLength,
	})
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/invocations/"+out.InvocationID)
	s.writeJSON(w, r, http.StatusAccepted, out)
}

// clientAddr is the sender's address: the TCP peer, unless the peer is a trusted proxy; then the
// right-most X-Forwarded-For entry that is not a trusted proxy (entries further left are the
// client's own claims, and not believed).
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap()
	if !inAny(trusted, peer) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	addr := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return addr
		}
		addr = a.Unmap()
		if !inAny(trusted, addr) {
			return addr
		}
	}
	return addr
}

func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
