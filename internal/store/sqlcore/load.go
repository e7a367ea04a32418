package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// The queries of TenantLoads. Each one walks an index whose size follows the work in flight or the
// tenants, never the history kept:
//   - the queue, through the partial index invocations_runnable (rows with available_at only): the
//     store's own query (TenantLoads' queueQuery), as each database's planner needs it written;
//   - expired leases, through the partial index invocations_leased (rows holding a lease only);
//   - in-flight counts, one range of invocations_tenant_inflight (tenant_id, status) per tenant and
//     in-flight status (terminal rows are never visited);
//   - definitions, the entrypoints table (bounded by the max_definitions quotas, not by traffic).
//
// LoadLeasesQuery and LoadInFlightQuery are exported so that a store's tests can check their plans.
const (
	loadTenantsQuery = "SELECT tenant_id, policy FROM tenants ORDER BY tenant_id"
	// LoadLeasesQuery counts each tenant's expired leases at a time (its argument).
	LoadLeasesQuery = `SELECT tenant_id, count(*) FROM invocations
		WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= ? GROUP BY tenant_id`
	// LoadInFlightQuery counts each tenant's invocations in each in-flight status.
	LoadInFlightQuery = `SELECT t.tenant_id, s.status,
		(SELECT count(*) FROM invocations i WHERE i.tenant_id = t.tenant_id AND i.status = s.status)
		FROM tenants t CROSS JOIN (SELECT 'queued' AS status UNION ALL SELECT 'running' UNION ALL SELECT 'suspended'
		UNION ALL SELECT 'compensating') s`
	loadDefinitionsQuery = "SELECT tenant_id, count(*) FROM entrypoints WHERE status <> 'archived' GROUP BY tenant_id"
)

// TenantLoads implements store.Reader's TenantLoads on q, which the store opens as one read-only
// transaction (a consistent snapshot). queueQuery, run with queueArgs, counts each tenant's ready
// and delayed invocations at now (rows of tenant_id, ready, delayed).
func TenantLoads(ctx context.Context, q Querier, now time.Time, queueQuery string, queueArgs ...any) ([]store.TenantLoad, error) {
	out, err := loadTenants(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("tenant loads: %w", err)
	}
	into := loadIndex(out)
	n := TS(now)
	err = loadQueue(ctx, q, into, queueQuery, queueArgs)
	if err == nil {
		err = loadLeases(ctx, q, into, n)
	}
	if err == nil {
		err = loadInFlight(ctx, q, into)
	}
	if err == nil {
		err = loadDefinitions(ctx, q, into)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant loads: %w", err)
	}
	return out, nil
}

// loadTenants reads every tenant's policy: one load per tenant, in tenant order, with its quotas.
func loadTenants(ctx context.Context, q Querier) ([]store.TenantLoad, error) {
	var out []store.TenantLoad
	err := eachRow(ctx, q, loadTenantsQuery, nil, func(r *sql.Rows) error {
		var id, doc string
		if err := r.Scan(&id, &doc); err != nil {
			return err
		}
		var p tenant.Policy
		if err := json.Unmarshal([]byte(doc), &p); err != nil {
			return fmt.Errorf("tenant %s policy: %w", id, err)
		}
		out = append(out, store.TenantLoad{TenantID: id, Quotas: p.Quotas})
		return nil
	})
	return out, err
}

// loadInto finds the load a count of a tenant lands in.
type loadInto func(tenantID string) *store.TenantLoad

// loadIndex indexes the loads by tenant. Each count lands in the load of its tenant. Work of a
// tenant without a policy cannot exist (starting work needs an enabled tenant); such rows would be
// skipped (counted into a load that is thrown away).
func loadIndex(loads []store.TenantLoad) loadInto {
	byTenant := map[string]*store.TenantLoad{}
	for i := range loads {
		byTenant[loads[i].TenantID] = &loads[i]
	}
	return func(id string) *store.TenantLoad {
		if l := byTenant[id]; l != nil {
			return l
		}
		return &store.TenantLoad{}
	}
}

// loadQueue counts each tenant's ready and delayed invocations with the store's queueQuery.
func loadQueue(ctx context.Context, q Querier, into loadInto, queueQuery string, queueArgs []any) error {
	return eachRow(ctx, q, queueQuery, queueArgs, func(r *sql.Rows) error {
		var id string
		var ready, delayed int64
		if err := r.Scan(&id, &ready, &delayed); err != nil {
			return err
		}
		l := into(id)
		l.Ready, l.Delayed = ready, delayed
		return nil
	})
}

// loadLeases counts each tenant's leases expired at now (stored timestamp text).
func loadLeases(ctx context.Context, q Querier, into loadInto, now string) error {
	return eachRow(ctx, q, LoadLeasesQuery, []any{now}, func(r *sql.Rows) error {
		var id string
		var c int64
		if err := r.Scan(&id, &c); err != nil {
			return err
		}
		into(id).LeaseExpired = c
		return nil
	})
}

// loadInFlight counts each tenant's invocations in each in-flight status (a status without any is
// left out of the load's map).
func loadInFlight(ctx context.Context, q Querier, into loadInto) error {
	return eachRow(ctx, q, LoadInFlightQuery, nil, func(r *sql.Rows) error {
		var id, st string
		var c int64
		if err := r.Scan(&id, &st, &c); err != nil {
			return err
		}
		if c == 0 {
			return nil
		}
		l := into(id)
		if l.InFlight == nil {
			l.InFlight = make(map[invocation.Status]int64, 4)
		}
		l.InFlight[invocation.Status(st)] = c
		return nil
	})
}

// loadDefinitions counts each tenant's definitions that are not archived.
func loadDefinitions(ctx context.Context, q Querier, into loadInto) error {
	return eachRow(ctx, q, loadDefinitionsQuery, nil, func(r *sql.Rows) error {
		var id string
		var c int64
		if err := r.Scan(&id, &c); err != nil {
			return err
		}
		into(id).Definitions = c
		return nil
	})
}

// eachRow runs query on q and calls fn for every row.
func eachRow(ctx context.Context, q Querier, query string, qargs []any, fn func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, qargs...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
