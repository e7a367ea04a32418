package storetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/scalefill"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// PlanTenant is the tenant of the rows ListPlans' queries read (a scalefill main tenant).
const PlanTenant = "acme"

// ListPlan is one documented list query (docs/api.md, "Which filters are indexed") and the index
// each of its reads of Table must use: a store's test runs List through a Reader whose Querier
// explains every query it is given, and fails when the plan reads Table without one of Indexes,
// scans it whole, or sorts more than a page of it.
type ListPlan struct {
	Name    string
	Table   string
	Indexes []string
	// Split says the filter is read one value at a time (a UNION ALL of pages), whose merge the
	// database may sort: at most one page per value.
	Split bool
	List  func(ctx context.Context, r *sqlcore.Reader) error
}

// invocationsPage lists the plan tenant's invocations as v sees them.
func invocationsPage(v invocation.Viewer, filter, orderBy string) func(context.Context, *sqlcore.Reader) error {
	return func(ctx context.Context, r *sqlcore.Reader) error {
		q, err := listQuery(filter, orderBy)
		if err != nil {
			return err
		}
		page, err := r.ListInvocations(ctx, v, q)
		if err != nil || page.NextCursor == "" {
			return err
		}
		q.Cursor = page.NextCursor // the second page: the keyset predicate must keep the index
		_, err = r.ListInvocations(ctx, v, q)
		return err
	}
}

func listQuery(filter, orderBy string) (store.ListQuery, error) {
	q := store.ListQuery{Limit: 25}
	var err error
	if filter != "" {
		if q.Filter, err = odata.ParseFilter(filter); err != nil {
			return q, err
		}
	}
	if orderBy != "" {
		q.OrderBy, err = odata.ParseOrderBy(orderBy)
	}
	return q, err
}

// ListPlans are the documented list queries of the large lists, each with the index it must use.
func ListPlans() []ListPlan {
	admin := invocation.Viewer{TenantID: PlanTenant, SubjectID: "bench", All: true}
	dev := invocation.Viewer{TenantID: PlanTenant, SubjectID: "someone"}
	ep0, ep1 := "'"+scalefill.EntrypointID(0)+"'", "'"+scalefill.EntrypointID(1)+"'"
	const (
		created = "invocations_tenant_created"
		status  = "invocations_tenant_status_created"
		// (tenant_id, status, entrypoint_ref) serves a status with no row or a few: PostgreSQL
		// takes it when its statistics say so, and sorts what it finds (at most a page, or the
		// check fails).
		statusRef = "invocations_tenant_status_ref"
		ep        = "invocations_tenant_entrypoint_created"
	)
	inv := func(name string, v invocation.Viewer, filter, orderBy string, split bool, idx ...string) ListPlan {
		return ListPlan{Name: "invocations " + name, Table: "invocations", Indexes: idx, Split: split,
			List: invocationsPage(v, filter, orderBy)}
	}
	from := time.Now().Add(-2 * scalefill.Span / 3).UTC().Format(time.RFC3339)
	to := time.Now().Add(-scalefill.Span / 3).UTC().Format(time.RFC3339)
	plans := []ListPlan{
		inv("default order", admin, "", "", false, created),
		inv("created_at asc", admin, "", "created_at asc", false, created),
		inv("created_at range", admin, "created_at ge "+from+" and created_at lt "+to, "", false, created),
		inv("status eq (no match)", admin, "status eq 'running'", "", false, status, statusRef),
		inv("status eq", admin, "status eq 'failed'", "", false, status, statusRef),
		inv("status eq, created_at asc", admin, "status eq 'failed'", "created_at asc", false, status, statusRef),
		inv("status eq, visibility", dev, "status eq 'running'", "", false, status, statusRef),
		inv("status in", admin, "status in ('queued', 'running', 'failed')", "", true, status, statusRef),
		inv("status or", admin, "status eq 'failed' or status eq 'dead_lettered'", "", true, status, statusRef),
		inv("status in, visibility", dev, "status in ('succeeded', 'failed')", "", true, status, statusRef),
		inv("entrypoint_id eq", admin, "entrypoint_id eq "+ep0, "", false, ep),
		inv("entrypoint_id in", admin, "entrypoint_id in ("+ep0+", "+ep1+")", "", true, ep),
		inv("entrypoint_id eq and status eq", admin, "entrypoint_id eq "+ep0+" and status eq 'failed'", "", false, ep, status, statusRef),
		inv("entrypoint_id eq and status in", admin, "entrypoint_id eq "+ep0+" and status in ('failed', 'running')", "", true, ep, status, statusRef),
		inv("mode eq", admin, "mode eq 'sync'", "", false, "invocations_tenant_mode_created"),
		inv("correlation_id eq", admin, "correlation_id eq 'corr_scale_7'", "", false, "invocations_tenant_correlation_created"),
	}
	return append(plans, otherListPlans()...)
}

// otherListPlans are the other large lists' documented queries.
func otherListPlans() []ListPlan {
	list := func(name, table, filter, orderBy string, idx string, call func(context.Context, *sqlcore.Reader, store.ListQuery) error, more ...string) ListPlan {
		return ListPlan{Name: name, Table: table, Indexes: append([]string{idx}, more...), List: func(ctx context.Context, r *sqlcore.Reader) error {
			q, err := listQuery(filter, orderBy)
			if err != nil {
				return err
			}
			return call(ctx, r, q)
		}}
	}
	audit := func(ctx context.Context, r *sqlcore.Reader, q store.ListQuery) error {
		_, err := r.ListAudit(ctx, PlanTenant, q)
		return err
	}
	runs := func(ctx context.Context, r *sqlcore.Reader, q store.ListQuery) error {
		_, err := r.ScheduleRuns(ctx, PlanTenant, "sch_1", q)
		return err
	}
	parts := func(ctx context.Context, r *sqlcore.Reader, q store.ListQuery) error {
		_, err := r.BackfillPartitions(ctx, PlanTenant, "bf_1", q)
		return err
	}
	dead := func(ctx context.Context, r *sqlcore.Reader, q store.ListQuery) error {
		_, err := r.DeadLetters(ctx, PlanTenant, "trg_1", q)
		return err
	}
	return []ListPlan{
		// A tenant's events in order: its own index, or every tenant's in order when the tenant
		// holds most of them (the planner's choice; either reads about a page).
		list("audit default order", "audit_events", "", "", "audit_events_tenant_at", audit, "audit_events_at"),
		list("audit correlation_id eq", "audit_events", "correlation_id eq 'corr_1'", "", "audit_events_tenant_correlation", audit),
		list("audit resource", "audit_events", "resource_type eq 'entrypoint' and resource_id eq 'ep_1'", "", "audit_events_tenant_resource", audit),
		list("audit actor_id eq", "audit_events", "actor_id eq 'operator'", "timestamp desc", "audit_events_tenant_actor", audit),
		list("audit type eq", "audit_events", "type eq 'x'", "", "audit_events_tenant_type", audit),
		list("audit, the operator's view", "audit_events", "", "timestamp desc", "audit_events_at", func(ctx context.Context, r *sqlcore.Reader, q store.ListQuery) error {
			_, err := r.ListAudit(ctx, "", q)
			return err
		}),
		list("audit, the operator's view, a time range", "audit_events", "timestamp ge 2026-01-01T00:00:00Z and timestamp lt 2026-01-02T00:00:00Z", "",
			"audit_events_at", func(ctx context.Context, r *sqlcore.Reader, q store.ListQuery) error {
				_, err := r.ListAudit(ctx, "", q)
				return err
			}),
		list("schedule history default order", "schedule_runs", "", "", "schedule_runs_history", runs),
		list("schedule history kind eq", "schedule_runs", "kind eq 'manual'", "", "schedule_runs_kind", runs),
		list("backfill partitions default order", "backfill_partitions", "", "", "backfill_partitions_scheduled", parts),
		list("backfill partitions status eq", "backfill_partitions", "status eq 'failed'", "", "backfill_partitions_state_scheduled", parts),
		list("dead letters default order", "trigger_dead_letters", "", "", "trigger_dead_letters_created", dead),
		list("dead letters invocation_id eq", "trigger_dead_letters", "invocation_id eq 'inv_1'", "", "trigger_dead_letters_by_invocation", dead),
		// The timeline reads an invocation's log by its primary key (an index of its own on SQLite, whose
		// log is a rowid table since migration 17; the fill writes no log: the
		// read answers a gap, after the query was explained).
		{Name: "timeline", Table: "invocation_events", Indexes: []string{"PRIMARY KEY", "sqlite_autoindex_invocation_events_1", "invocation_events_pkey"},
			List: func(ctx context.Context, r *sqlcore.Reader) error {
				_, err := r.Events(ctx, store.EventLogQuery{TenantID: PlanTenant, InvocationID: "inv_scale000000000000000000000001", AfterSeq: 1, Limit: 25})
				if gap := (*store.GapError)(nil); errors.As(err, &gap) {
					return nil
				}
				return err
			}},
	}
}

// Explained is what a store's explaining Querier recorded: each query's plan, one line per node.
type Explained struct {
	Query string
	Plan  []string
}

// CheckSQLitePlan returns why SQLite's plans of p's queries break its rule, or "": every search of
// p.Table uses one of p.Indexes (at least one does), nothing is scanned whole, and only a split
// query sorts more than the rows of equal leading key (its merge of at most one page per value).
func CheckSQLitePlan(p ListPlan, queries []Explained) string {
	used := false
	for _, q := range queries {
		for _, line := range q.Plan {
			f := strings.Fields(line)
			switch {
			case len(f) >= 2 && f[0] == "SCAN" && usesIndex(line, p.Indexes) && !strings.Contains(q.Query, " WHERE "):
				used = true // no condition at all: an ordered walk of the index, which the LIMIT stops
			case len(f) >= 2 && f[0] == "SCAN" && !strings.HasPrefix(f[1], "lark_b") && !strings.HasPrefix(f[1], "("):
				return "scans " + f[1] + " whole: " + line
			case strings.HasPrefix(line, "USE TEMP B-TREE FOR ORDER BY") && !p.Split:
				return "sorts every matching row: " + line
			case len(f) >= 2 && f[0] == "SEARCH":
				if usesIndex(line, p.Indexes) {
					used = true
				} else if f[1] == p.Table {
					return "searches " + p.Table + " with another index: " + line
				}
			}
		}
	}
	if !used {
		return "no search of " + p.Table + " with " + strings.Join(p.Indexes, " or ")
	}
	return ""
}

// CheckPostgresPlan is CheckSQLitePlan for PostgreSQL's EXPLAIN: no sequential scan of p.Table, an
// index scan with one of p.Indexes, and no full sort (an incremental sort of the rows of equal
// leading key is fine; a split query's merge may sort its pages).
func CheckPostgresPlan(p ListPlan, queries []Explained) string {
	used := false
	for _, q := range queries {
		for i, line := range q.Plan {
			t := strings.TrimLeft(line, " ->")
			switch {
			case strings.HasPrefix(t, "Seq Scan on "+p.Table):
				return "scans " + p.Table + " whole: " + t
			case strings.HasPrefix(t, "Sort  (") && (!p.Split || i != 1) && planRows(t) > store.MaxLimit+1:
				// A sort of more than a page: the rows of every value, not one page of an index
				// (a split query's merge, the node under its Limit, sorts its branches' pages).
				return "sorts every matching row: " + t
			case strings.HasPrefix(t, "Bitmap Index Scan on "):
				if !usesIndex(t, p.Indexes) {
					return "reads " + p.Table + " with another index: " + t
				}
				used = true
			case strings.Contains(t, " on "+p.Table) && strings.Contains(t, "Index"):
				if !usesIndex(t, p.Indexes) {
					return "reads " + p.Table + " with another index: " + t
				}
				used = true
			}
		}
	}
	if !used {
		return "no index scan of " + p.Table + " with " + strings.Join(p.Indexes, " or ")
	}
	return ""
}

// planRows is the rows estimate of an EXPLAIN node ("rows=N"), 0 when it has none.
func planRows(node string) int {
	_, after, ok := strings.Cut(node, " rows=")
	if !ok {
		return 0
	}
	end := strings.IndexFunc(after, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(after)
	}
	n, _ := strconv.Atoi(after[:end])
	return n
}

func usesIndex(line string, indexes []string) bool {
	line += " "
	for _, idx := range indexes {
		if strings.Contains(line, "INDEX "+idx+" ") || strings.Contains(line, "using "+idx+" ") ||
			strings.Contains(line, "Index Scan on "+idx+" ") ||
			(idx == "PRIMARY KEY" && strings.Contains(line, "USING PRIMARY KEY")) {
			return true
		}
	}
	return false
}
