package api

import (
	"net/http"

	"github.com/larkrun/lark/internal/auth"
)

// Whoami is the answer of GET /whoami: who the bearer token authenticates as. Clients that hold
// only a token (the web console, scripts) learn their tenant and roles from it without needing a
// role that may list tokens.
type Whoami struct {
	TenantID         *string     `json:"tenant_id"`
	SubjectID        string      `json:"subject_id"`
	Roles            []auth.Role `json:"roles"`
	PlatformOperator bool        `json:"platform_operator"`
	TokenID          *string     `json:"token_id"`
}

// whoami answers the caller's security context. Any valid token may read its own.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	sc := security(r)
	roles := sc.Roles
	if roles == nil {
		roles = []auth.Role{}
	}
	s.writeJSON(w, r, http.StatusOK, Whoami{TenantID: strPtr(sc.TenantID), SubjectID: sc.SubjectID, Roles: roles,
		PlatformOperator: sc.Operator, TokenID: strPtr(sc.TokenID)})
}
