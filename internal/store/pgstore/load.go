package pgstore

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
//   - the queue, through the partial index invocations_runnable (rows with available_at only);
//   - expired leases, through the partial index invocations_leased (rows holding a lease only);
//   - in-flight counts, one range of invocations_tenant_inflight (tenant_id, status) per tenant and
//     in-flight status (terminal rows are never visited);
//   - definitions, the entrypoints table (bounded by the max_definitions quotas, not by traffic).
const (
	loadTenantsQuery = "SELECT tenant_id, policy FROM tenants ORDER BY tenant_id"
	loadQueueQuery   = `SELECT tenant_id, count(*) FILTER (WHERE available_at <= ?), count(*) FILTER (WHERE available_at > ?)
		FROM invocations WHERE available_at IS NOT NULL GROUP BY tenant_id`
	loadLeasesQuery = `SELECT tenant_id, count(*) FROM invocations
		WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= ? GROUP BY tenant_id`
	loadInFlightQuery = `SELECT t.tenant_id, s.status,
		(SELECT count(*) FROM invocations i WHERE i.tenant_id = t.tenant_id AND i.status = s.status)
		FROM tenants t CROSS JOIN (SELECT 'queued' AS status UNION ALL SELECT 'running' UNION ALL SELECT 'suspended'
		UNION ALL SELECT 'compensating') s`
	loadDefinitionsQuery = "SELECT tenant_id, count(*) FROM entrypoints WHERE status <> 'archived' GROUP BY tenant_id"
)

// TenantLoads implements store.Reader, in one read transaction (a consistent snapshot).
func (s *Store) TenantLoads(ctx context.Context, now time.Time) ([]store.TenantLoad, error) {
	rtx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("tenant loads: %w", err)
	}
	defer rtx.Rollback() //nolint:errcheck // read-only: nothing to keep
	var out []store.TenantLoad
	byTenant := map[string]*store.TenantLoad{}
	err = eachRow(ctx, rebound{rtx}, loadTenantsQuery, nil, func(r *sql.Rows) error {
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
	if err != nil {
		return nil, fmt.Errorf("tenant loads: %w", err)
	}
	for i := range out {
		byTenant[out[i].TenantID] = &out[i]
	}
	n := ts(now)
	// Each count lands in the load of its tenant. Work of a tenant without a policy cannot exist
	// (starting work needs an enabled tenant); such rows would be skipped.
	into := func(id string) *store.TenantLoad {
		if l := byTenant[id]; l != nil {
			return l
		}
		return &store.TenantLoad{}
	}
	err = eachRow(ctx, rebound{rtx}, loadQueueQuery, []any{n, n}, func(r *sql.Rows) error {
		var id string
		var ready, delayed int64
		if err := r.Scan(&id, &ready, &delayed); err != nil {
			return err
		}
		l := into(id)
		l.Ready, l.Delayed = ready, delayed
		return nil
	})
	if err == nil {
		err = eachRow(ctx, rebound{rtx}, loadLeasesQuery, []any{n}, func(r *sql.Rows) error {
			var id string
			var c int64
			if err := r.Scan(&id, &c); err != nil {
				return err
			}
			into(id).LeaseExpired = c
			return nil
		})
	}
	if err == nil {
		err = eachRow(ctx, rebound{rtx}, loadInFlightQuery, nil, func(r *sql.Rows) error {
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
	if err == nil {
		err = eachRow(ctx, rebound{rtx}, loadDefinitionsQuery, nil, func(r *sql.Rows) error {
			var id string
			var c int64
			if err := r.Scan(&id, &c); err != nil {
				return err
			}
			into(id).Definitions = c
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("tenant loads: %w", err)
	}
	return out, nil
}

// eachRow runs query on q and calls fn for every row.
func eachRow(ctx context.Context, q querier, query string, qargs []any, fn func(*sql.Rows) error) error {
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
