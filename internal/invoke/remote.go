package invoke

import (
	"context"
	"encoding/json"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/run"
)

// RemoteAttempt is a claimed function attempt handed to remote workers: the claim's data, the run
// stage's view of it (source, limits, retry policy, compiled returns schema) and the stored
// returns schema, for a worker to check against.
type RemoteAttempt struct {
	Attempt attempt.Attempt
	Run     run.Attempt
	Returns json.RawMessage
}

// Remote runs claimed function attempts in remote workers (package workers). Takes reports
// whether an attempt goes to a worker; Run hands it over and waits for what it came to. Run
// answers ok=false when no result will come (the worker was lost): the attempt is then not
// completed here, and its lease runs out and is reclaimed like a crashed node's.
type Remote interface {
	Takes(e entrypoint.Entrypoint) bool
	Run(ctx context.Context, a RemoteAttempt) (res run.Result, ok bool)
}

// runRemote runs a claimed function attempt in a remote worker and completes it here, with the
// lease check, like a local one. Cancellation (Cancel) cancels ctx, which the remote side passes
// on to the worker in its next heartbeat answer; the worker's result then arrives after the lease
// was cleared and is recorded as late_result.
func (s *Service) runRemote(ctx context.Context, a attempt.Attempt, d definition) {
	rec := a.Invocation
	s.dequeued(rec)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.track(rec.ID, cancel)
	defer s.untrack(rec.ID)
	res, ok := s.cfg.Remote.Run(runCtx, RemoteAttempt{Attempt: a, Run: s.attempt(rec, a.Entrypoint, d, nil), Returns: d.Schema.Returns})
	if !ok {
		return
	}
	if _, err := s.complete(context.WithoutCancel(ctx), rec, d, res.Timeline, res.Outcome, nil); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "remote attempt not recorded", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
	}
}
