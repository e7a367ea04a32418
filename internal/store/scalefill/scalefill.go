// Package scalefill writes many finished invocations into a store's invocations table at once, for
// `lark bench`'s scale scenario and for the tests that check which index each documented list
// filter uses: set-based INSERT ... SELECT statements that generate the rows inside the database
// (SQLite's recursive WITH, PostgreSQL's generate_series), so that no row crosses the connection
// and a million rows take about a minute rather than an hour of API calls.
//
// Row i of a fill of total rows (i from 0) is, by i:
//   - tenant: i%22 < 20 the main tenant, 20 and 21 the tenants Others (so the main tenant holds
//     N = Main(total) rows and each other tenant a twentieth of that);
//   - status: (i*37)%100 < 90 succeeded, < 95 failed, < 97 canceled, < 99 dead_lettered, else
//     compensated (none is in flight: a filter on queued or running matches nothing);
//   - entrypoint: EntrypointID(i%10) (version ref "ep_scale<k>"), owned by the tenant; mode sync
//     for i%5 == 0, else async; started by subject "bench";
//   - correlation id "corr_scale_<i>"; created Span/total apart, oldest first, the last at end;
//     finished 20 ms after it was created, and already measured by the retention job (history_*
//     set), so that the job has nothing to catch up on.
//
// The record column is a real invocation record's JSON, which the API renders like any other.
package scalefill

import (
	"fmt"
	"strings"
	"time"
)

// Span is the time the rows' created_at spread over: within the default retention of 7 days, so
// that the retention job purges none of them.
const Span = 4 * 24 * time.Hour

// Others are the tenants of the rows besides the main one.
var Others = []string{"scale-b", "scale-c"}

// EntrypointID is the GTS id of the fill's entrypoint k (0-9).
func EntrypointID(k int) string {
	return fmt.Sprintf("gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.bench.scale%d.v1~", k)
}

// Total is the number of rows of a fill whose main tenant holds n.
func Total(n int) int { return n + n/10 }

// Dialect is what differs between the databases in the fill's statements.
type Dialect struct {
	series string              // a CTE "g(i)" of the integers from the first argument (inclusive) to the second (exclusive)
	ts     func(string) string // the stored time text of an integer expression of microseconds since the epoch
	pad    func(string) string // an integer expression as 24 digits with leading zeros
}

// SQLite is SQLite's dialect (arguments ?1, ?2).
var SQLite = Dialect{
	series: "WITH RECURSIVE g(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?2)",
	ts: func(us string) string {
		return fmt.Sprintf("(strftime('%%Y-%%m-%%dT%%H:%%M:%%S', (%[1]s) / 1000000, 'unixepoch') || printf('.%%06dZ', (%[1]s) %% 1000000))", us)
	},
	pad: func(x string) string { return "printf('%024d', " + x + ")" },
}

// Postgres is PostgreSQL's dialect (arguments $1, $2).
var Postgres = Dialect{
	series: "WITH g(i) AS (SELECT generate_series($1::bigint, $2::bigint - 1))",
	ts: func(us string) string {
		return fmt.Sprintf(`to_char(timestamp '1970-01-01' + (%s) * interval '1 microsecond', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`, us)
	},
	pad: func(x string) string { return "lpad((" + x + ")::text, 24, '0')" },
}

// Insert is the statement that inserts rows from <= i < to (its two arguments) of a fill of total
// rows whose main tenant is tenant and whose newest row is created at end. Run it in chunks (each
// chunk is one statement and one transaction), then TenantHistory.
func (d Dialect) Insert(tenant string, total int, end time.Time) string {
	step := Span.Microseconds() / int64(max(total, 1))
	first := end.UnixMicro() - step*int64(total-1)
	created := fmt.Sprintf("(%d + i * %d)", first, step)
	eps := make([]string, 10)
	for k := range eps {
		eps[k] = fmt.Sprintf("WHEN %d THEN '%s'", k, EntrypointID(k))
	}
	rows := fmt.Sprintf(`, r AS (SELECT i, 'inv_scale' || %s AS id,
		CASE WHEN i %% 22 < 20 THEN '%s' WHEN i %% 22 = 20 THEN '%s' ELSE '%s' END AS tenant_id,
		'ep_scale' || (i %% 10) AS ref, CASE i %% 10 %s END AS ep,
		CASE WHEN (i * 37) %% 100 < 90 THEN 'succeeded' WHEN (i * 37) %% 100 < 95 THEN 'failed'
		  WHEN (i * 37) %% 100 < 97 THEN 'canceled' WHEN (i * 37) %% 100 < 99 THEN 'dead_lettered' ELSE 'compensated' END AS status,
		CASE WHEN i %% 5 = 0 THEN 'sync' ELSE 'async' END AS mode,
		'corr_scale_' || i AS corr, %s AS created, %s AS finished FROM g)`,
		d.pad("i"), tenant, Others[0], Others[1], strings.Join(eps, " "), d.ts(created), d.ts(created+" + 20000"))
	record := `'{"invocation_id":"' || id || '","tenant_id":"' || tenant_id || '","entrypoint_ref":"' || ref ||
		'","entrypoint_id":"' || ep || '","subject_id":"bench","status":"' || status || '","mode":"' || mode ||
		'","params":{"invoice_id":"inv_001","amount":100},"result":{"ok":true},"correlation_id":"' || corr ||
		'","attempt":1,"created_at":"' || created || '","started_at":"' || created || '","finished_at":"' || finished ||
		'","updated_at":"' || finished || '","last_seq":3}'`
	return d.series + rows + `, x AS (SELECT r.*, ` + record + ` AS record FROM r)
		INSERT INTO invocations (id, tenant_id, entrypoint_ref, entrypoint_id, status, mode, correlation_id, last_seq, record,
		  created_at, updated_at, history_seq, history_bytes, history_finished_at, subject_id, entrypoint_owner)
		SELECT id, tenant_id, ref, ep, status, mode, corr, 3, record, created, finished, 3, length(record), finished, 'bench', ''
		FROM x`
}

// TenantHistory sets each tenant's history total (the retention job's running sum) to its
// invocations' measured bytes, after a fill.
const TenantHistory = `INSERT INTO tenant_history (tenant_id, bytes) SELECT tenant_id, sum(history_bytes) FROM invocations
	WHERE history_bytes IS NOT NULL GROUP BY tenant_id
	ON CONFLICT (tenant_id) DO UPDATE SET bytes = excluded.bytes`
