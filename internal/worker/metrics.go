package worker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/renderbox/renderbox/internal/sandbox"
)

// Metrics are the worker's Prometheus metrics.
type Metrics struct {
	Jobs     *prometheus.CounterVec
	Phase    *prometheus.HistogramVec
	InFlight prometheus.Gauge
	Wait     prometheus.Histogram
}

// NewMetrics registers the worker's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderbox_worker_jobs_total", Help: "Jobs run, by renderer and outcome.",
		}, []string{"renderer", "outcome"}),
		Phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "renderbox_sandbox_phase_seconds", Help: "Sandbox phases: create, start, render, teardown.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"renderer", "phase"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "renderbox_sandboxes_in_flight", Help: "Sandboxes running now.",
		}),
		Wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "renderbox_job_queue_wait_seconds", Help: "From acceptance by the API to the start of an attempt.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
	}
	reg.MustRegister(m.Jobs, m.Phase, m.InFlight, m.Wait)
	return m
}

func (m *Metrics) observe(renderer string, o sandbox.Outcome, res *sandbox.Result) {
	if m == nil {
		return
	}
	m.Jobs.WithLabelValues(renderer, string(o)).Inc()
	if res == nil {
		return
	}
	for phase, d := range map[string]float64{
		"create": res.Timings.Create.Seconds(), "start": res.Timings.Start.Seconds(),
		"render": res.Timings.Render.Seconds(), "teardown": res.Timings.Teardown.Seconds(),
	} {
		if d > 0 {
			m.Phase.WithLabelValues(renderer, phase).Observe(d)
		}
	}
}

// start records an attempt's start and returns the func that ends it.
func (m *Metrics) start(accepted time.Time) func() {
	if m == nil {
		return func() {}
	}
	if !accepted.IsZero() {
		m.Wait.Observe(time.Since(accepted).Seconds())
	}
	m.InFlight.Inc()
	return m.InFlight.Dec
}
