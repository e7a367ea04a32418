package api_test

// The flow families of GET /metrics, driven through the real services: runs by what started
// them, attempts by kind and outcome, events published and delivered to waits, event triggers
// fired, refused, dead-lettered and redriven, and webhook deliveries by outcome.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// awaitMetric scrapes until the sample has value want, or fails after 30 s.
func (e *env) awaitMetric(t *testing.T, want float64, name string, labels ...string) scrape {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := e.scrapeMetrics(t, operator)
		v, _ := s.value(name, labels...)
		if v == want {
			return s
		}
		require.True(t, time.Now().Before(deadline), "%s%v is %v, want %v", name, labels, v, want)
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFlowMetrics(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	invDispatcher(t, w.env)
	e, adm := w.env, w.adm

	s := e.scrapeMetrics(t, operator)
	for _, o := range []string{"accepted", "unauthorized", "replayed", "payload_too_large", "not_found"} {
		s.require(t, 0, "lark_webhook_deliveries_total", "outcome", o)
	}

	t.Run("an API start: a run started by the api, a function attempt that succeeded", func(t *testing.T) {
		ok := e.registerActive(t, adm, echoFn(t, "flow.ok.v1~"))["entrypoint_id"].(string)
		rec := invSync(t, e, adm, ok, obj{}, nil)
		require.Equal(t, "succeeded", rec["status"], "%v", rec)
		s := e.scrapeMetrics(t, operator)
		s.require(t, 1, "lark_runs_started_total", "tenant", "acme", "trigger", "api")
		s.require(t, 1, "lark_attempts_total", "tenant", "acme", "kind", "function", "outcome", "succeeded")
	})

	t.Run("event triggers: fired, dead-lettered, redriven, refused", func(t *testing.T) {
		ep := e.registerActive(t, adm, failFn(t, "flow.fail.v1~"))["entrypoint_id"].(string)
		e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "flow", "event_type_id": orderType, "entrypoint_id": ep})
		publish(t, e, adm, http.StatusAccepted, obj{"event_id": "o1", "event_type_id": orderType, "payload": obj{}})
		e.awaitMetric(t, 1, "lark_trigger_outcomes_total", "tenant", "acme", "outcome", "dead_lettered")
		s := e.scrapeMetrics(t, operator)
		s.require(t, 1, "lark_events_published_total", "tenant", "acme")
		s.require(t, 1, "lark_trigger_outcomes_total", "tenant", "acme", "outcome", "fired")
		s.require(t, 1, "lark_runs_started_total", "tenant", "acme", "trigger", "event_trigger")
		s.require(t, 1, "lark_attempts_total", "tenant", "acme", "kind", "function", "outcome", "failed")

		e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/flow/dead-letters:redrive", adm, nil)
		s = e.awaitMetric(t, 2, "lark_trigger_outcomes_total", "tenant", "acme", "outcome", "dead_lettered")
		s.require(t, 2, "lark_trigger_outcomes_total", "tenant", "acme", "outcome", "fired")
		s.require(t, 1, "lark_trigger_outcomes_total", "tenant", "acme", "outcome", "redriven")
		s.require(t, 2, "lark_runs_started_total", "tenant", "acme", "trigger", "event_trigger")

		e.status(t, adm, ep, "disable")
		publish(t, e, adm, http.StatusAccepted, obj{"event_id": "o2", "event_type_id": orderType, "payload": obj{}})
		s = e.scrapeMetrics(t, operator)
		s.require(t, 1, "lark_trigger_outcomes_total", "tenant", "acme", "outcome", "refused")
		s.require(t, 3, "lark_trigger_outcomes_total", "tenant", "acme", "outcome", "dead_lettered")
		s.require(t, 2, "lark_events_published_total", "tenant", "acme")
		publish(t, e, adm, http.StatusOK, obj{"event_id": "o2", "event_type_id": orderType, "payload": obj{}}) // a replayed id
		e.scrapeMetrics(t, operator).require(t, 2, "lark_events_published_total", "tenant", "acme")
	})

	t.Run("a waiting workflow resumed by an event: delivered, workflow activations", func(t *testing.T) {
		const waitType = "gts.x.core.events.event.v1~vendor.app.flow.go.v1~"
		src := fmt.Sprintf("def main(ctx, input):\n    ev = r_await(r_wait_event_v1(%q, timeout_ms=600000))\n    return {\"got\": ev.value[\"event_id\"]}\n", waitType)
		wf := e.registerActive(t, adm, wfBody(t, "flow_waiter.v1~", src))["entrypoint_id"].(string)
		id := invID(invAsync(t, e, adm, wf, obj{}, nil))
		invWait(t, e, adm, id, "suspended")
		e.scrapeMetrics(t, operator).require(t, 1, "lark_attempts_total", "tenant", "acme", "kind", "workflow", "outcome", "suspended")
		r := publish(t, e, adm, http.StatusAccepted, obj{"event_id": "go1", "event_type_id": waitType, "payload": obj{}})
		require.Equal(t, 1.0, r.Body["delivered"], "%s", r)
		e.scrapeMetrics(t, operator).require(t, 1, "lark_events_delivered_total", "tenant", "acme")
		require.Equal(t, "succeeded", invWait(t, e, adm, id, wfTerminal...)["status"])
		e.awaitMetric(t, 1, "lark_attempts_total", "tenant", "acme", "kind", "workflow", "outcome", "succeeded")
	})

	t.Run("webhook deliveries by outcome; their runs", func(t *testing.T) {
		st := w.create(t, obj{"webhook_trigger_id": "flow", "authentication": obj{"type": "hmac_sha256", "format": "stripe"}, "max_body_bytes": 64})
		secret := st["secret"].(string)
		body := `{"type":"invoice.paid"}`
		good := stripe(secret, body, w.clk.Now())
		require.Equal(t, http.StatusAccepted, w.deliver(t, "flow", body, good).Status)
		require.Equal(t, http.StatusUnauthorized, w.deliver(t, "flow", body, good).Status)
		require.Equal(t, http.StatusUnauthorized, w.deliver(t, "flow", body, stripe("whsec_forged-forged-forged", body, w.clk.Now())).Status)
		big := `{"pad":"` + strings.Repeat("x", 100) + `"}`
		require.Equal(t, http.StatusRequestEntityTooLarge, w.deliver(t, "flow", big, stripe(secret, big, w.clk.Now())).Status)
		require.Equal(t, http.StatusNotFound, w.deliver(t, "nope", body, good).Status)
		s := e.scrapeMetrics(t, operator)
		s.require(t, 1, "lark_webhook_deliveries_total", "outcome", "accepted")
		s.require(t, 1, "lark_webhook_deliveries_total", "outcome", "replayed")
		s.require(t, 1, "lark_webhook_deliveries_total", "outcome", "unauthorized")
		s.require(t, 1, "lark_webhook_deliveries_total", "outcome", "payload_too_large")
		s.require(t, 1, "lark_webhook_deliveries_total", "outcome", "not_found")
		s.require(t, 1, "lark_runs_started_total", "tenant", "acme", "trigger", "webhook")
		_, found := s.value("lark_webhook_deliveries_total", "outcome", "accepted", "tenant", "acme")
		require.False(t, found, "webhook deliveries carry no tenant label")
	})
}
