package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/renderbox/renderbox/internal/fetch"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
)

type metrics struct {
	requests *prometheus.HistogramVec
	accepted *prometheus.CounterVec
	finished *prometheus.CounterVec
	webhooks *prometheus.CounterVec
	// events counts result events by what applying them did, per
	// delivery: applied, unknown_job, invalid, error.
	events *prometheus.CounterVec
	// deadLettered counts events moved to the dead-letter stream, by the
	// last failure's kind.
	deadLettered *prometheus.CounterVec
	// fetches counts what download_from fetched and refused.
	fetches *fetch.Metrics
	// lost counts the jobs the reconciler ended because the queue lost
	// them, by where the queue had them ("" nowhere, or archived).
	lost *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, q *queue.Queue, store ledger.Store, heartbeatTimeout time.Duration) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "renderbox_http_request_seconds", Help: "HTTP requests by route and status.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 12),
		}, []string{"route", "method", "status"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderbox_jobs_accepted_total", Help: "Jobs accepted, by renderer.",
		}, []string{"renderer"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderbox_jobs_finished_total", Help: "Jobs that reached a terminal state, by state and error code.",
		}, []string{"state", "code"}),
	}
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renderbox_events_total", Help: "Result event deliveries this replica handled, by outcome: applied, unknown_job (a job its ledger does not know: replicas with ledgers of their own?), invalid, error (left pending, retried).",
	}, []string{"outcome"})
	m.deadLettered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renderbox_events_dead_lettered_total", Help: "Result events this replica gave up and moved to the dead-letter stream, by their last failure.",
	}, []string{"reason"})
	m.webhooks = newWebhookMetric(reg)
	m.fetches = fetch.NewMetrics(reg)
	m.lost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renderbox_jobs_lost_total", Help: "Jobs failed by the reconciler because the queue no longer held them (queue=\"none\") or asynq archived their task with no result (queue=\"archived\").",
	}, []string{"queue"})
	m.lost.WithLabelValues("none")
	m.lost.WithLabelValues("archived") // both served from the start, for the alert
	reg.MustRegister(m.requests, m.accepted, m.finished, m.events, m.deadLettered, m.lost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if q != nil {
		reg.MustRegister(
			redisGauge("renderbox_queue_depth", "Jobs waiting or running in the asynq queue.", q.Depth),
			redisGauge("renderbox_workers_alive", "Workers whose last heartbeat is within -worker-heartbeat-timeout.",
				func(ctx context.Context) (int, error) { return q.WorkersAlive(ctx, heartbeatTimeout) }),
			redisGauge("renderbox_events_pending", "Result events read by an API replica and not yet acknowledged (being applied, or left to retry).",
				func(ctx context.Context) (int, error) { return q.EventsPending(ctx, eventGroup) }),
			redisGauge("renderbox_events_dead_letter", "Result events in the dead-letter stream (renderbox:events:dead): results NOT in the ledger.", q.DeadLetters))
	}
	if store != nil {
		// Read from the shared ledger: every replica shows the same.
		reg.MustRegister(
			probeGauge("renderbox_queue_oldest_seconds", "Age of the oldest job still queued, 0 when none is.", "the ledger",
				func(ctx context.Context) (float64, error) {
					b, err := store.Backlog(ctx)
					if err != nil || b.OldestQueued.IsZero() {
						return 0, err
					}
					return max(0, time.Since(b.OldestQueued).Seconds()), nil
				}),
			probeGauge("renderbox_webhooks_pending", "Webhooks waiting for a delivery attempt, due now or retrying later.", "the ledger",
				func(ctx context.Context) (float64, error) {
					b, err := store.Backlog(ctx)
					return float64(b.WebhooksPending), err
				}))
	}
	return m
}

// redisGauge is a gauge read from Redis at each scrape.
func redisGauge(name, help string, read func(context.Context) (int, error)) prometheus.GaugeFunc {
	return probeGauge(name, help, "Redis", func(ctx context.Context) (float64, error) {
		n, err := read(ctx)
		return float64(n), err
	})
}

// probeGauge is a gauge read from source at each scrape; -1 when it does
// not answer within a second.
func probeGauge(name, help, source string, read func(context.Context) (float64, error)) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help + " -1 when " + source + " does not answer."}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := read(ctx)
		if err != nil {
			return -1
		}
		return v
	})
}

func (m *metrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		t := time.Now()
		next.ServeHTTP(ww, r)
		// The route's pattern, never the raw path: paths are the client's.
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(ww.Status())).Observe(time.Since(t).Seconds())
	})
}

// methodLabel is r.Method when it is one of the standard methods the API
// could route, else "other": a label value taken from the client would let
// every made-up method mint a series that lives as long as the process.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodHead, http.MethodOptions, http.MethodPatch:
		return m
	}
	return "other"
}
