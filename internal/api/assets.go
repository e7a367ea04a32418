package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/assetops"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

// materializationPath is the route of one materialization of an asset (asset keys hold dots, never
// a colon or a slash).
const materializationPath = "/assets/{asset_key:[^:/]+}/materializations/{id:[^:/]+}"

// assetRoutes mounts the Assets API (docs/dag.md "Assets"): reads for viewers, the decisions on
// quarantined materializations for developers.
func (s *Server) assetRoutes(r chi.Router) {
	dev := r.With(s.need(auth.RoleDeveloper, "approving or rejecting materializations"))
	r.Get("/assets", s.listAssets)
	r.Get("/assets/{asset_key:[^:/]+}", s.getAsset)
	r.Get("/assets/{asset_key:[^:/]+}/materializations", s.listMaterializations)
	r.Get(materializationPath, s.getMaterialization)
	r.Get(materializationPath+"/data", s.materializationData)
	dev.Post(materializationPath+":approve", s.decideMaterialization((*assetops.Service).Approve))
	dev.Post(materializationPath+":reject", s.decideMaterialization((*assetops.Service).Reject))
}

// assetsService returns the service, or answers 503 when there is none.
func (s *Server) assetsService(w http.ResponseWriter, r *http.Request) *assetops.Service {
	if s.cfg.Assets == nil {
		s.problem(w, r, problem.New(problem.TypeUnavailable, "assets are not served by this server"))
		return nil
	}
	return s.cfg.Assets
}

func (s *Server) listAssets(w http.ResponseWriter, r *http.Request) {
	if svc := s.assetsService(w, r); svc != nil {
		servePage(s, w, r, func(q store.ListQuery) (store.Page[asset.Asset], error) {
			return svc.ListAssets(r.Context(), security(r), q)
		}, asIs)
	}
}

func (s *Server) getAsset(w http.ResponseWriter, r *http.Request) {
	svc := s.assetsService(w, r)
	if svc == nil {
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	a, err := svc.Asset(r.Context(), security(r), chi.URLParam(r, "asset_key"))
	s.respond(w, r, a, err)
}

// listMaterializations answers GET /assets/{asset_key}/materializations: the list parameters, and
// partition_key and state as equalities (the same as in $filter).
func (s *Server) listMaterializations(w http.ResponseWriter, r *http.Request) {
	svc := s.assetsService(w, r)
	if svc == nil {
		return
	}
	var f assetops.Filter
	v := r.URL.Query()
	if v.Has("partition_key") {
		p := v.Get("partition_key")
		f.PartitionKey = &p
	}
	if v.Has("state") {
		st := v.Get("state")
		f.State = &st
	}
	servePage(s, w, r, func(q store.ListQuery) (store.Page[asset.Materialization], error) {
		return svc.ListMaterializations(r.Context(), security(r), chi.URLParam(r, "asset_key"), f, q)
	}, asIs, "partition_key", "state")
}

func (s *Server) getMaterialization(w http.ResponseWriter, r *http.Request) {
	svc := s.assetsService(w, r)
	if svc == nil {
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	m, err := svc.Materialization(r.Context(), security(r), chi.URLParam(r, "asset_key"), chi.URLParam(r, "id"))
	s.respond(w, r, m, err)
}

// materializationData answers GET .../materializations/{id}/data: the output as the task returned
// it (JSON), read from the blob store.
func (s *Server) materializationData(w http.ResponseWriter, r *http.Request) {
	svc := s.assetsService(w, r)
	if svc == nil {
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	b, err := svc.Data(r.Context(), security(r), chi.URLParam(r, "asset_key"), chi.URLParam(r, "id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// decideMaterialization answers POST .../materializations/{id}:approve and :reject, with an
// optional {"reason": "..."} body.
func (s *Server) decideMaterialization(decide func(*assetops.Service, context.Context, auth.SecurityContext, string, string,
	assetops.Decision) (asset.Materialization, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		svc := s.assetsService(w, r)
		if svc == nil {
			return
		}
		if err := onlyParams(r); err != nil {
			s.problem(w, r, err)
			return
		}
		var d assetops.Decision
		if err := decodeStruct(r, &d, true); err != nil {
			s.problem(w, r, err)
			return
		}
		m, err := decide(svc, r.Context(), security(r), chi.URLParam(r, "asset_key"), chi.URLParam(r, "id"), d)
		s.respond(w, r, m, err)
	}
}
