package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/scheduler"
)

// BenchmarkScheduleFire fires b.N schedules due at the same instant (no dispatcher running) and
// reports fires per second; the baseline is one POST /invocations-equivalent system start per
// schedule written the same way (see docs/benchmarks.md).
func BenchmarkScheduleFire(b *testing.B) {
	s := newSchEnv(b, time.Date(2026, 11, 24, 9, 59, 0, 0, time.UTC))
	sc := auth.SecurityContext{TenantID: "acme", SubjectID: "bench", Roles: []auth.Role{auth.RoleAdmin}}
	ctx := context.Background()
	for i := range b.N {
		_, err := s.srv.Schedules.Create(ctx, sc, scheduler.Spec{ScheduleID: fmt.Sprintf("b%06d", i), EntrypointID: taxV1,
			Expression: &schedule.Expression{Kind: "cron", Value: "0 * * * *"}, InputOverrides: []byte(`{"invoice_id":"b"}`)})
		require.NoError(b, err)
	}
	s.clk.Set(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	b.ResetTimer()
	start := time.Now()
	n, err := s.srv.Schedules.FireDue(ctx)
	el := time.Since(start)
	require.NoError(b, err)
	require.Equal(b, b.N, n)
	b.ReportMetric(float64(n)/el.Seconds(), "fires/s")
}
