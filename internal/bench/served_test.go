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
