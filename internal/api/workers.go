package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/workerhub"
	"github.com/larkrun/lark/internal/workerproto"
)

// NonceStore remembers worker envelope nonces durably (the store: Tx.UseNonce), so that a captured
// envelope that changes something (a poll, a result, a secret request) is refused after a restart
// too; heartbeats change nothing and are checked in memory only.
type NonceStore interface {
	UseNonce(ctx context.Context, nonce string, expires time.Time) (bool, error)
}

// workerEnvelopeTTL is how long the server's signed answers to workers stay valid.
const workerEnvelopeTTL = workerproto.DefaultLifetime

type workerBodyKey struct{}

// workerKeyID is the context key of the id of the key a worker request was signed with: its
// answer is signed with the same key (Keyset.SignWith), so that a worker that has only that key
// verifies it, whichever side of a rotation added the new key first.
type workerKeyID struct{}

// workerRoutes mounts the worker route group (docs/workers.md): beside the bearer-token base path,
// authenticated by the signed envelope every request is (verifyEnvelope), answered with signed
// envelopes. Without a worker service or keyset the routes answer 404.
func (s *Server) workerRoutes(r chi.Router) {
	if s.cfg.WorkerHub == nil || s.cfg.WorkerKeys == nil {
		return
	}
	g := r.With(s.verifyEnvelope)
	g.Post(BasePath+workerproto.PathPoll, s.workerPoll)
	g.Post(BasePath+workerproto.PathHeartbeat, s.workerHeartbeat)
	g.Post(BasePath+workerproto.PathResult, s.workerResult)
	g.Post(BasePath+workerproto.PathSecret, s.workerSecret)
}

// verifyEnvelope is the worker group's authentication: the body (at most
// workerproto.MaxBodyBytes, 413) must be one envelope signed by a key of the worker keyset, not
// expired and with a nonce not seen before (401 otherwise). The handler gets its body.
func (s *Server) verifyEnvelope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, workerproto.MaxBodyBytes))
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.problem(w, r, problem.New(problem.TypePayloadTooLarge, "a worker request body is at most %d bytes", workerproto.MaxBodyBytes))
			return
		}
		if err != nil {
			s.problem(w, r, problem.BadRequest("reading the body: %v", err))
			return
		}
		var env workerproto.Envelope
		if err := strictDecode(b, &env, true); err != nil {
			s.problem(w, r, problem.Unauthorized("the body is not a signed envelope"))
			return
		}
		if err := s.cfg.WorkerKeys.Verify(env, s.workerNow(), s.workerNonces); err != nil {
			s.problem(w, r, problem.Unauthorized("envelope refused: %v", err))
			return
		}
		if s.cfg.WorkerNonces != nil && !strings.HasSuffix(r.URL.Path, workerproto.PathHeartbeat) {
			fresh, err := s.cfg.WorkerNonces.UseNonce(r.Context(), env.Nonce, time.Unix(env.Exp, 0))
			if err != nil {
				s.problem(w, r, problem.Internal(err)) // a store outage answers 503 (s.problem maps it)
				return
			}
			if !fresh {
				s.problem(w, r, problem.Unauthorized("envelope refused: %v", workerproto.ErrReplayed))
				return
			}
		}
		ctx := context.WithValue(context.WithValue(r.Context(), workerBodyKey{}, []byte(env.Body)), workerKeyID{}, env.KeyID)
		ctx = workerhub.WithKey(ctx, env.KeyID) // the key's tenant bindings
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// listWorkers answers GET /workers: the remote workers the nodes have seen (docs/workers.md,
// "Seeing the workers"), to the platform operator all of them, to a tenant's operator or admin
// those its tasks may go to. A server without remote workers (no worker key) lists none.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[workerhub.WorkerView], error) {
		if s.cfg.WorkerHub == nil {
			return store.Page[workerhub.WorkerView]{}, nil
		}
		return s.cfg.WorkerHub.Workers(r.Context(), security(r), q)
	}, asIs)
}

// workerListRoute mounts GET /workers (operator role or the platform operator).
func (s *Server) workerListRoute(r chi.Router) {
	r.With(s.need(auth.RoleOperator, "reading workers")).Get("/workers", s.listWorkers)
}

func (s *Server) workerNow() time.Time {
	if s.cfg.WorkerClock != nil {
		return s.cfg.WorkerClock.Now()
	}
	return time.Now()
}

// workerBody decodes the verified envelope's body into v (unknown members refused: 422).
func workerBody(r *http.Request, v any) error {
	b, _ := r.Context().Value(workerBodyKey{}).([]byte)
	if err := strictDecode(b, v, true); err != nil {
		return problem.Validation("invalid body", []problem.Issue{{Path: "$.body", Code: "INVALID", Message: err.Error()}})
	}
	return nil
}

// signed answers v as a signed envelope, with 200 OK, under the key the request was signed with.
func (s *Server) signed(w http.ResponseWriter, r *http.Request, v any) {
	kid, _ := r.Context().Value(workerKeyID{}).(string)
	env, err := s.cfg.WorkerKeys.SignWith(kid, v, s.workerNow(), workerEnvelopeTTL)
	if err != nil {
		s.problem(w, r, problem.Internal(err))
		return
	}
	b, err := json.Marshal(env)
	if err != nil {
		s.problem(w, r, problem.Internal(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) workerPoll(w http.ResponseWriter, r *http.Request) {
	var req workerproto.PollRequest
	if err := workerBody(r, &req); err != nil {
		s.problem(w, r, err)
		return
	}
	if req.WaitMS > 0 {
		// The long poll may outlast the server's write timeout.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Duration(req.WaitMS)*time.Millisecond + s.cfg.WriteTimeout))
	}
	reply, err := s.cfg.WorkerHub.Poll(r.Context(), req)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	s.signed(w, r, reply)
}

func (s *Server) workerHeartbeat(w http.ResponseWriter, r *http.Request) {
	var hb workerproto.Heartbeat
	if err := workerBody(r, &hb); err != nil {
		s.problem(w, r, err)
		return
	}
	reply, err := s.cfg.WorkerHub.Heartbeat(r.Context(), hb)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	s.signed(w, r, reply)
}

func (s *Server) workerResult(w http.ResponseWriter, r *http.Request) {
	var res workerproto.Result
	if err := workerBody(r, &res); err != nil {
		s.problem(w, r, err)
		return
	}
	if err := s.cfg.WorkerHub.Result(r.Context(), chi.URLParam(r, "task_id"), res); err != nil {
		s.problem(w, r, err)
		return
	}
	s.signed(w, r, map[string]any{"accepted": true})
}

func (s *Server) workerSecret(w http.ResponseWriter, r *http.Request) {
	var req workerproto.SecretRequest
	if err := workerBody(r, &req); err != nil {
		s.problem(w, r, err)
		return
	}
	reply, err := s.cfg.WorkerHub.Secret(r.Context(), chi.URLParam(r, "task_id"), req)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	s.signed(w, r, reply)
}
