package registry

import (
	"sort"
	"strings"

	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schema"
)

// Location is where a finding points: a JSON path in the definition and, for source code, a line
// and column.
type Location struct {
	Path   string `json:"path"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// Finding is one error or warning of a validation report (001).
type Finding struct {
	Code          string   `json:"code"`
	Message       string   `json:"message"`
	Location      Location `json:"location"`
	SourceSnippet string   `json:"source_snippet,omitempty"`
}

// Info summarises what validation learned about the definition.
type Info struct {
	EntrypointID           string   `json:"entrypoint_id,omitempty"`
	Kind                   string   `json:"kind,omitempty"`
	DetectedFeatures       []string `json:"detected_features"`
	UsesWorkflowPrimitives bool     `json:"uses_workflow_primitives"`
}

// Report is 001's validation report, returned by the :validate endpoints.
type Report struct {
	ID       string    `json:"id,omitempty"`
	Valid    bool      `json:"valid"`
	Errors   []Finding `json:"errors"`
	Warnings []Finding `json:"warnings"`
	Info     Info      `json:"info"`
}

// Finding codes Lark adds to the schema and Starlark ones.
const (
	CodeReadOnly      = "READ_ONLY_FIELD"
	CodeOwnership     = "OWNERSHIP"
	CodeVersion       = "VERSION_MISMATCH"
	CodeInvalidID     = "INVALID_ENTRYPOINT_ID"
	CodePolicy        = "POLICY_VIOLATION"
	CodeQuota         = "QUOTA_EXCEEDED"
	CodeCompensation  = "COMPENSATION_HANDLER"
	CodeKindMismatch  = "KIND_MISMATCH"
	CodeNotAnObject   = "INVALID_BODY"
	sourcePath        = "$.implementation.code.source"
	compensationPath  = "$.traits.workflow.compensation."
	compensationCtxID = "gts.x.core.serverless.compensation_context.v1~"
)

func (r *Report) fail(code, path, format string) {
	r.Errors = append(r.Errors, Finding{Code: code, Message: format, Location: Location{Path: path}})
}

func (r *Report) addSchemaIssues(issues []schema.Issue) {
	for _, is := range issues {
		r.Errors = append(r.Errors, Finding{Code: strings.ToUpper(is.Code), Message: is.Message, Location: Location{Path: is.Path}})
	}
}

func (r *Report) finish() {
	sort.SliceStable(r.Errors, func(i, j int) bool {
		a, b := r.Errors[i].Location, r.Errors[j].Location
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	r.Valid = len(r.Errors) == 0
	if r.Errors == nil {
		r.Errors = []Finding{}
	}
	if r.Warnings == nil {
		r.Warnings = []Finding{}
	}
	if r.Info.DetectedFeatures == nil {
		r.Info.DetectedFeatures = []string{}
	}
}

// problem turns a failed report into a 422 problem with one issue per error.
func (r *Report) problem(detail string) *problem.Error {
	issues := make([]problem.Issue, 0, len(r.Errors))
	for _, f := range r.Errors {
		issues = append(issues, problem.Issue{Path: f.Location.Path, Message: f.Message, Code: f.Code,
			Line: f.Location.Line, Column: f.Location.Column})
	}
	return problem.Validation(detail, issues).With("warnings", r.Warnings)
}
