package bench

import (
	"bufio"
	"reflect"
	"strings"
	"testing"
	"time"
)

const metricsText = `# HELP renderbox_pool_idle Pre-booted sandboxes ready for a job.
# TYPE renderbox_pool_idle gauge
renderbox_pool_idle{family="chromium"} 2
renderbox_pool_idle{family="light"} 1
renderbox_pool_idle_memory_bytes{family="office"} 9e+08
renderbox_pool_size{family="chromium"} 2
renderbox_worker_jobs_total{mode="restored",outcome="succeeded",renderer="html-pdf"} 30
renderbox_worker_jobs_total{mode="cold",outcome="succeeded",renderer="html-pdf"} 4
renderbox_worker_jobs_total{mode="cold",outcome="render_failed",renderer="html-pdf"} 1
renderbox_worker_jobs_total{mode="prebooted",outcome="succeeded",renderer="pdf-png"} 7
go_goroutines 12
`

// The pool's gauges are picked per family and jobs summed per mode out of
// the text format; a worker without them reads as nil.
func TestByLabel(t *testing.T) {
	ss := parseMetrics(bufio.NewScanner(strings.NewReader(metricsText)))
	for _, c := range []struct {
		name, label string
		where       map[string]string
		want        map[string]float64
	}{
		{"renderbox_pool_idle", "family", nil, map[string]float64{"chromium": 2, "light": 1}},
		{"renderbox_pool_size", "family", nil, map[string]float64{"chromium": 2}},
		{"renderbox_worker_jobs_total", "mode", map[string]string{"renderer": "html-pdf"}, map[string]float64{"restored": 30, "cold": 5}},
		{"renderbox_pool_idle", "family", map[string]string{"renderer": "x"}, nil},
		{"renderbox_absent", "family", nil, nil},
	} {
		if got := byLabel(ss, c.name, c.label, c.where); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s by %s where %v: got %v, want %v", c.name, c.label, c.where, got, c.want)
		}
	}
}

// The serial phase's latency is split into the worker's queue wait and
// sandbox phases per job, from the metrics before and after it; teardown,
// which follows the result, and other renderers are left out; the rest is
// "other". Without metrics there is no split.
func TestSerialSplit(t *testing.T) {
	parse := func(s string) []sample { return parseMetrics(bufio.NewScanner(strings.NewReader(s))) }
	before := parse(`renderbox_job_queue_wait_seconds_sum 1.5
renderbox_sandbox_phase_seconds_sum{phase="render",renderer="pdf-png"} 2
renderbox_sandbox_phase_seconds_sum{phase="teardown",renderer="pdf-png"} 1
renderbox_sandbox_phase_seconds_sum{phase="render",renderer="html-pdf"} 9
`)
	after := parse(`renderbox_job_queue_wait_seconds_sum 1.7
renderbox_sandbox_phase_seconds_sum{phase="render",renderer="pdf-png"} 4
renderbox_sandbox_phase_seconds_sum{phase="create",renderer="pdf-png"} 0.3
renderbox_sandbox_phase_seconds_sum{phase="teardown",renderer="pdf-png"} 2
renderbox_sandbox_phase_seconds_sum{phase="render",renderer="html-pdf"} 19
`)
	serial := []time.Duration{250 * time.Millisecond, 300 * time.Millisecond, 350 * time.Millisecond, 300 * time.Millisecond,
		250 * time.Millisecond, 300 * time.Millisecond, 350 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	got := serialSplit(before, after, "pdf-png", serial)
	want := map[string]float64{"total": 300, "queue_wait": 20, "sandbox_render": 200, "sandbox_create": 30, "other": 50}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := serialSplit(nil, after, "pdf-png", serial); got != nil {
		t.Errorf("without metrics: got %v, want nil", got)
	}
	if got := serialSplit(before, after, "pdf-png", nil); got != nil {
		t.Errorf("without jobs: got %v, want nil", got)
	}
}

// Host CPU is read, positive, and never goes back.
func TestHostCPU(t *testing.T) {
	a, sa, err := hostCPU()
	if err != nil {
		t.Fatal(err)
	}
	b, sb, _ := hostCPU()
	if a <= 0 || b < a {
		t.Errorf("got %v then %v, want positive and not decreasing", a, b)
	}
	if sa < 0 || sb < sa {
		t.Errorf("steal: got %v then %v, want not negative and not decreasing", sa, sb)
	}
}

// The summary divides warm by cold and by native-warm per renderer and
// figure over the lines with documents in Redis, and warm with an object
// store by warm with Redis, only where both were measured; the last line
// of a renderer and mode wins; a mode measured for no renderer leaves its
// key out.
func TestSummary(t *testing.T) {
	line := func(r, mode string, p50, jobs, cpu float64) servedLine {
		return servedLine{Bench: "served", Renderer: r, Mode: mode, P50: p50, P99: 2 * p50, JobsPerS: jobs, CPUPerJob: cpu}
	}
	s3 := func(l servedLine) servedLine { l.Storage = storageS3; return l }
	got := summary("t", []servedLine{
		line("html-pdf", modeCold, 1600, 0.8, 2.5),
		line("html-pdf", modeWarm, 9999, 9, 9), // replaced below
		line("svg-png", modeCold, 300, 3, 0.5),
		line("html-pdf", modeNativeWarm, 250, 4, 0.4),
		line("pdf-png", modeNativeWarm, 100, 8, 0.1),
		line("html-pdf", modeWarm, 500, 1.6, 1.2),
		line("svg-png", modeWarm, 120, 6, 0.25),
		s3(line("html-pdf", modeWarm, 550, 1.2, 1.5)),
		s3(line("dot-svg", modeWarm, 100, 5, 0.2)), // no redis twin
	})
	want := map[string]any{"time": "t", "bench": "summary",
		"warm_over_cold": map[string]map[string]float64{
			"html-pdf": {"p50_ms": 0.31, "p99_ms": 0.31, "jobs_per_s": 2, "cpu_s_per_job": 0.48},
			"svg-png":  {"p50_ms": 0.4, "p99_ms": 0.4, "jobs_per_s": 2, "cpu_s_per_job": 0.5},
		},
		"warm_over_native_warm": map[string]map[string]float64{
			"html-pdf": {"p50_ms": 2, "p99_ms": 2, "jobs_per_s": 0.4, "cpu_s_per_job": 3},
		},
		"s3_over_redis": map[string]map[string]float64{
			"html-pdf": {"p50_ms": 1.1, "p99_ms": 1.1, "jobs_per_s": 0.75, "cpu_s_per_job": 1.25},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v,\nwant %v", got, want)
	}
	if got := summary("t", []servedLine{line("html-pdf", modeWarm, 500, 1.6, 1.2), line("html-pdf", modeCold, 1000, 0.8, 2.4)}); got["warm_over_native_warm"] != nil || got["warm_over_cold"] == nil {
		t.Errorf("without native-warm lines: got %v, want warm_over_cold only", got)
	}
}

// Each job's sandbox mode is read from the worker's counter, the floor's
// native-warm and native-cold as any other.
func TestNativeModesCounted(t *testing.T) {
	ss := parseMetrics(bufio.NewScanner(strings.NewReader(`renderbox_worker_jobs_total{mode="native-warm",outcome="succeeded",renderer="html-pdf"} 33
renderbox_worker_jobs_total{mode="native-cold",outcome="succeeded",renderer="html-pdf"} 1
renderbox_worker_jobs_total{mode="prebooted",outcome="succeeded",renderer="pdf-png"} 7
`)))
	got := byLabel(ss, "renderbox_worker_jobs_total", "mode", map[string]string{"renderer": "html-pdf"})
	if want := map[string]float64{"native-warm": 33, "native-cold": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
