package larkclient

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// Entrypoint is one registered version of a function or workflow (docs/api.md §6).
type Entrypoint struct {
	Raw
	// ID is the server-assigned id (ep_…).
	ID string `json:"id"`
	// EntrypointID is the full GTS id.
	EntrypointID string `json:"entrypoint_id"`
	// Kind is function or workflow.
	Kind string `json:"kind"`
	// Version is MAJOR.MINOR.PATCH.
	Version string `json:"version"`
	// Status is draft, active, deprecated, disabled or archived.
	Status string `json:"status"`
	// Title is the human title.
	Title string `json:"title"`
	// Tags are the entrypoint's tags.
	Tags []string `json:"tags"`
	// CreatedAt and UpdatedAt are the record's times.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"` // when the record last changed
	// Warnings are the validator's warnings (register and update answers).
	Warnings []Finding `json:"warnings,omitempty"`
}

// Finding is one finding of a validation report.
type Finding struct {
	// Code is the finding code (SYNTAX_ERROR, MISSING_FIELD, …).
	Code string `json:"code"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Location is where: a JSON path and, for Starlark findings, line and column.
	Location struct {
		Path   string `json:"path"`
		Line   int    `json:"line,omitempty"`
		Column int    `json:"column,omitempty"`
	} `json:"location"`
	// SourceSnippet is the source line of a Starlark finding.
	SourceSnippet string `json:"source_snippet,omitempty"`
}

// ValidationReport is the answer of both :validate routes (001's report).
type ValidationReport struct {
	Raw
	// ID is set when a stored entrypoint was validated.
	ID string `json:"id,omitempty"`
	// Valid is true when Errors is empty.
	Valid bool `json:"valid"`
	// Errors and Warnings are the findings.
	Errors   []Finding `json:"errors"`
	Warnings []Finding `json:"warnings"` // findings that do not block registration (e.g. MISSING_TIMEOUT)
	// Info holds the detected features.
	Info json.RawMessage `json:"info"`
}

// EntrypointVersion is one item of GET /entrypoints/{id}/versions.
type EntrypointVersion struct {
	Raw
	ID           string `json:"id"`            // the ep_ id
	EntrypointID string `json:"entrypoint_id"` // the exact GTS id of this version
	Version      string `json:"version"`       // MAJOR.MINOR.PATCH
	Status       string `json:"status"`        // draft, active, deprecated, disabled or archived
}

// Versions is the answer of GET /entrypoints/{id}/versions.
type Versions struct {
	Raw
	// Family is the GTS id without its last version.
	Family string `json:"family"`
	// Items are the versions, by major then minor.
	Items []EntrypointVersion `json:"items"`
}

// StatusAction is the body of POST /entrypoints/{id}:status.
type StatusAction struct {
	// Action is activate, deprecate, disable, enable or archive.
	Action string `json:"action"`
	// ReleaseNotes go with activate.
	ReleaseNotes string `json:"release_notes,omitempty"`
	// Reason, SuccessorID and SunsetDate go with deprecate.
	Reason      string `json:"reason,omitempty"`
	SuccessorID string `json:"successor_id,omitempty"` // deprecate: the GTS id that replaces it
	SunsetDate  string `json:"sunset_date,omitempty"`  // deprecate: RFC 3339 date after which it goes away
}

// ListEntrypoints returns one page of the entrypoints the caller can see; includeSource adds
// implementation.code.source.
func (c *Client) ListEntrypoints(ctx context.Context, opts ListOptions, includeSource bool) (*Page[Entrypoint], error) {
	q := opts.values()
	if includeSource {
		q.Set("include_source", "true")
	}
	return listPage[Entrypoint](ctx, c, "/entrypoints", q)
}

// AllEntrypoints iterates every entrypoint matching opts, page after page.
func (c *Client) AllEntrypoints(ctx context.Context, opts ListOptions, includeSource bool) iter.Seq2[Entrypoint, error] {
	return all(ctx, opts, func(ctx context.Context, o ListOptions) (*Page[Entrypoint], error) {
		return c.ListEntrypoints(ctx, o, includeSource)
	})
}

// GetEntrypoint returns one entrypoint by ep_ id or GTS id (a major-only GTS id resolves to the
// latest active minor).
func (c *Client) GetEntrypoint(ctx context.Context, id string, includeSource bool) (*Entrypoint, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var q url.Values
	if includeSource {
		q = url.Values{"include_source": {"true"}}
	}
	var e Entrypoint
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/entrypoints/" + esc(id), query: q}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// RegisterEntrypoint registers a new entrypoint version (a draft) from a registration body.
func (c *Client) RegisterEntrypoint(ctx context.Context, body json.RawMessage) (*Entrypoint, error) {
	var e Entrypoint
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/entrypoints", body: body}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// UpdateEntrypoint replaces a draft's definition (PUT).
func (c *Client) UpdateEntrypoint(ctx context.Context, id string, body json.RawMessage) (*Entrypoint, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var e Entrypoint
	if _, err := c.call(ctx, request{method: http.MethodPut, path: "/entrypoints/" + esc(id), body: body}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ValidateEntrypoint validates a registration body without saving anything.
func (c *Client) ValidateEntrypoint(ctx context.Context, body json.RawMessage) (*ValidationReport, error) {
	var r ValidationReport
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/entrypoints:validate", body: body}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ValidateExistingEntrypoint re-checks a stored entrypoint against the current schemas and policy.
func (c *Client) ValidateExistingEntrypoint(ctx context.Context, id string) (*ValidationReport, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var r ValidationReport
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/entrypoints/" + esc(id) + ":validate"}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// SetEntrypointStatus runs a lifecycle action (activate, deprecate, disable, enable, archive).
func (c *Client) SetEntrypointStatus(ctx context.Context, id string, a StatusAction) (*Entrypoint, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var e Entrypoint
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/entrypoints/" + esc(id) + ":status", body: a}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ActivateEntrypoint moves a draft to active.
func (c *Client) ActivateEntrypoint(ctx context.Context, id, releaseNotes string) (*Entrypoint, error) {
	return c.SetEntrypointStatus(ctx, id, StatusAction{Action: "activate", ReleaseNotes: releaseNotes})
}

// DeleteEntrypoint hard-deletes a draft or archives any other status; force archives even with
// invocations in flight. It returns the archived entrypoint, or nil after a hard delete.
func (c *Client) DeleteEntrypoint(ctx context.Context, id string, force bool) (*Entrypoint, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	res, err := c.do(ctx, request{method: http.MethodDelete, path: "/entrypoints/" + esc(id), query: q})
	if err != nil || res.status == http.StatusNoContent {
		return nil, err
	}
	var e Entrypoint
	if err := decode(res.body, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// EntrypointVersions lists every version the caller can see in the entrypoint's family.
func (c *Client) EntrypointVersions(ctx context.Context, id string) (*Versions, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var v Versions
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/entrypoints/" + esc(id) + "/versions"}, &v); err != nil {
		return nil, err
	}
	raws := extractItems(v.JSON)
	for i := range v.Items {
		if i < len(raws) {
			v.Items[i].setRaw(raws[i])
		}
	}
	return &v, nil
}
