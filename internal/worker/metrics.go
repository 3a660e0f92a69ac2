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
	// The pool's: hits and misses by family (and mode or reason), fills by
	// family and mode, and how long a fill or a checkpoint image took.
	PoolTaken  *prometheus.CounterVec
	PoolEvents *prometheus.CounterVec
	PoolFill   *prometheus.HistogramVec
}

// NewMetrics registers the worker's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderbox_worker_jobs_total", Help: "Jobs run, by renderer, outcome and how the sandbox was made (cold, prebooted, restored).",
		}, []string{"renderer", "outcome", "mode"}),
		Phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "renderbox_sandbox_phase_seconds", Help: "Sandbox phases: take (waiting for the pool: a settling sandbox or a fill, or giving up), create, start, render, teardown.",
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
	m.PoolTaken = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renderbox_pool_jobs_total", Help: "Jobs that asked the pool for a sandbox: result hit (mode prebooted or restored) or miss (reason empty, spec_limits, higher_limits).",
	}, []string{"family", "result", "mode", "reason"})
	m.PoolEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renderbox_pool_events_total", Help: "Pool sandboxes filled, failed to fill, evicted (max idle, lowering failed) or found dead while idle, checkpoint images made, and a family's target grown (a job found it empty) or shrunk (a sandbox waited out max idle).",
	}, []string{"family", "event", "reason"})
	m.PoolFill = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "renderbox_pool_fill_seconds", Help: "Time to fill one pool sandbox (boot or restore) or to make a checkpoint image (mode image).",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 10),
	}, []string{"family", "mode"})
	reg.MustRegister(m.Jobs, m.Phase, m.InFlight, m.Wait, m.PoolTaken, m.PoolEvents, m.PoolFill)
	return m
}

// RegisterRootfs adds renderbox_worker_rootfs_info{digest}, always 1: the
// rootfs tree this worker verified at start and runs. Across the fleet,
// count by digest shows hosts on different trees (worker rootfs import).
func RegisterRootfs(reg prometheus.Registerer, digest string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "renderbox_worker_rootfs_info", Help: "The rootfs tree this worker runs, by its digest (the manifest's tree_sha256); always 1.",
	}, []string{"digest"})
	g.WithLabelValues(digest).Set(1)
	reg.MustRegister(g)
}

// PoolEvent records one event of the pool; pass it as PoolConfig.OnEvent.
func (m *Metrics) PoolEvent(e sandbox.PoolEvent) {
	if m == nil {
		return
	}
	kind := string(e.Kind)
	switch e.Kind {
	case sandbox.PoolHit:
		m.PoolTaken.WithLabelValues(e.Family, kind, e.Mode, "").Inc()
	case sandbox.PoolMiss:
		m.PoolTaken.WithLabelValues(e.Family, kind, "", e.Reason).Inc()
	case sandbox.PoolFill:
		m.PoolEvents.WithLabelValues(e.Family, kind, "").Inc()
		m.PoolFill.WithLabelValues(e.Family, e.Mode).Observe(e.Duration.Seconds())
	case sandbox.PoolImage:
		m.PoolEvents.WithLabelValues(e.Family, kind, "").Inc()
		m.PoolFill.WithLabelValues(e.Family, kind).Observe(e.Duration.Seconds())
	case sandbox.PoolFillFailed:
		// The reason is an error message: not a label.
		m.PoolEvents.WithLabelValues(e.Family, kind, "").Inc()
	default:
		m.PoolEvents.WithLabelValues(e.Family, kind, e.Reason).Inc()
	}
}

// RegisterPool adds gauges read from the pool at each scrape: sandboxes
// idle, the configured size, their memory, the checkpoint images in use and
// the oldest one's age.
func RegisterPool(reg prometheus.Registerer, p *sandbox.Pool) {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"family"}, nil)
	}
	reg.MustRegister(poolCollector{p: p,
		idle:   desc("renderbox_pool_idle", "Pre-booted sandboxes ready for a job."),
		size:   desc("renderbox_pool_size", "Idle sandboxes the pool keeps ready (the operator's size)."),
		target: desc("renderbox_pool_target", "Idle sandboxes the pool keeps ready now: the operator's size grown by demand (jobs that found the family empty), at most four times it, within the family's memory budget."),
		mem:    desc("renderbox_pool_idle_memory_bytes", "Memory the idle sandboxes' cgroups charge."),
		image:  desc("renderbox_pool_image_age_seconds", "Age of the oldest checkpoint image restores use now; 0 without one."),
		images: desc("renderbox_pool_images", "Checkpoint images restores pick from now."),
	})
}

type poolCollector struct {
	p                                      *sandbox.Pool
	idle, size, target, mem, image, images *prometheus.Desc
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.idle
	ch <- c.size
	ch <- c.target
	ch <- c.mem
	ch <- c.image
	ch <- c.images
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.p.Stats() {
		ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.Idle), s.Name)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(s.Size), s.Name)
		ch <- prometheus.MustNewConstMetric(c.target, prometheus.GaugeValue, float64(s.Target), s.Name)
		ch <- prometheus.MustNewConstMetric(c.mem, prometheus.GaugeValue, float64(s.IdleMemory), s.Name)
		ch <- prometheus.MustNewConstMetric(c.image, prometheus.GaugeValue, s.ImageAge.Seconds(), s.Name)
		ch <- prometheus.MustNewConstMetric(c.images, prometheus.GaugeValue, float64(s.Images), s.Name)
	}
}

func (m *Metrics) observe(renderer string, o sandbox.Outcome, mode string, res *sandbox.Result) {
	if m == nil {
		return
	}
	m.Jobs.WithLabelValues(renderer, string(o), mode).Inc()
	if res == nil {
		return
	}
	// Teardown comes after the result is reported: see teardown.
	for phase, d := range map[string]float64{
		"create": res.Timings.Create.Seconds(), "start": res.Timings.Start.Seconds(),
		"render": res.Timings.Render.Seconds(),
	} {
		if d > 0 {
			m.Phase.WithLabelValues(renderer, phase).Observe(d)
		}
	}
}

// took records how long a job waited for the pool: to take a sandbox
// (settling, or a fill under way, when none was ready) or to give up and
// run cold.
func (m *Metrics) took(renderer string, d time.Duration) {
	if m == nil {
		return
	}
	m.Phase.WithLabelValues(renderer, "take").Observe(d.Seconds())
}

// teardown records how long destroying a job's sandbox took.
func (m *Metrics) teardown(renderer string, res *sandbox.Result) {
	if m == nil || res == nil || res.Timings.Teardown <= 0 {
		return
	}
	m.Phase.WithLabelValues(renderer, "teardown").Observe(res.Timings.Teardown.Seconds())
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
