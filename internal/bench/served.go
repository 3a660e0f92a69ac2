package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
)

// servedOpts configure the served benchmark: jobs through the HTTP API
// against a running stack whose worker has its pool off ("cold"), on
// ("warm"), or on and running natively without gVisor ("native-warm", the
// floor: worker serve -unsafe-native-bench). The benchmark does not start
// or configure the worker; make bench runs it once per mode
// (scripts/bench.sh).
type servedOpts struct {
	mode        string   // cold, warm or native-warm: a label; the last two wait for the pool
	renderers   []string // default servedRenderers
	serial      int      // jobs one after another for p50/p99; default 10
	jobs        int      // jobs for the throughput phase; default 24
	concurrency int      // clients at once in the throughput phase; default 4
	metrics     string   // the worker's /metrics URL; "" = not known
	poolWait    time.Duration
	coldFile    string // JSON lines holding the run's earlier served lines, for the summary
	// storage labels where the stack keeps documents: "redis" (the
	// default) or "s3" (API and worker started with -blobs s3://…).
	storage string
}

// Served modes, in the order make bench measures them.
const (
	modeCold       = "cold"
	modeWarm       = "warm"
	modeNativeWarm = "native-warm"
)

// Served storages: the stack's -blobs, as the lines name it.
const (
	storageRedis = "redis"
	storageS3    = "s3"
)

// servedRenderers are every family's served renderers: chromium
// (html-pdf), office (office-pdf), pdf (pdf-png, pdf-merge) and light
// (svg-png, dot-svg, markdown-html, image-thumbnail).
const servedRenderers = "html-pdf,office-pdf,pdf-png,pdf-merge,svg-png,dot-svg,markdown-html,image-thumbnail"

// servedLine is one renderer in one mode. The first eight fields are the
// line docs/benchmarks.md shows, in its order, so served lines
// compare across runs.
type servedLine struct {
	Bench       string  `json:"bench"`
	Renderer    string  `json:"renderer"`
	Mode        string  `json:"mode"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	JobsPerS    float64 `json:"jobs_per_s"`
	Concurrency int     `json:"concurrency"`
	CPUPerJob   float64 `json:"cpu_s_per_job"`
	Serial      int     `json:"serial_n"`
	Jobs        int     `json:"throughput_n"`
	// CPUWindow says what the CPU figure covers: the throughput phase, and
	// in warm mode with the pool metric also the pool's refill after it
	// (the refills are what those jobs cost).
	CPUWindow string `json:"cpu_window"`
	// StealPerJob is the host's steal time over the same window per job:
	// time the hypervisor gave this VM's cores to others while they had
	// work. Where it is well above zero the host was slowed from outside
	// and latency and throughput read worse than the code is.
	StealPerJob float64 `json:"steal_s_per_job"`
	Input       string  `json:"input"`
	// Storage is where the stack kept the jobs' documents: redis (the
	// default) or s3 (an object store, -blobs s3://…).
	Storage string `json:"storage"`
	// PoolIdle is renderbox_pool_idle per family when the serial phase
	// began, when the worker's metrics are known: none or zeros for cold.
	PoolIdle map[string]float64 `json:"pool_idle,omitempty"`
	// Modes counts the measured jobs (serial and throughput) by how the
	// worker made their sandbox: cold, prebooted or restored — the pool's
	// hits and misses. Absent when the worker does not say.
	Modes map[string]float64 `json:"sandbox_modes,omitempty"`
	// SerialMean splits the serial phase's mean latency (total, at the
	// client) by the worker's metrics: queue_wait (the API's acceptance to
	// the attempt's start), the sandbox's take (the wait for the pool),
	// create, start and render phases (per job: create and start are zero
	// where a pool sandbox was ready),
	// and other (the rest: intake, the worker's Redis round trips, storing
	// and reporting the result, the download). Absent without the metrics.
	SerialMean map[string]float64 `json:"serial_mean_ms,omitempty"`
	// Failed counts jobs that did not succeed, warm-up included; latency
	// and throughput are over the ones that did.
	Failed int    `json:"failed"`
	Time   string `json:"time"`
}

// servedInput is what each renderer renders in the served benchmark: the
// documents docs/benchmarks.md names, kept fixed so served lines
// compare across runs. Other renderers use their entry in benchCases.
func servedInput(renderer string) ([]byte, string, error) {
	switch renderer {
	case "html-pdf":
		return samples.HTMLTable(30), "one-page HTML: heading, 30-row table, CSS", nil
	case "office-pdf":
		return samples.DOCX("renderbox benchmark", "Two paragraphs."), "two-paragraph DOCX", nil
	case "pdf-png":
		return samples.PDF("renderbox benchmark", 1), "one-page PDF, 150 dpi", nil
	}
	for _, c := range benchCases() {
		if c.renderer == renderer {
			return c.data, c.input, nil
		}
	}
	return nil, "", fmt.Errorf("served: no input for renderer %q (use one of the renderer lines' names)", renderer)
}

// benchServed prints one servedLine per renderer and returns them. Each
// renderer gets a warm-up job first (not counted), then o.serial jobs one
// after another (latency), then o.jobs jobs from o.concurrency clients at
// once (throughput, CPU). In warm mode each phase starts from a refilled
// pool: a phase measures the pool at rest, not one drained by the last.
func benchServed(ctx context.Context, out *json.Encoder, stamp string, api *apiClient, o servedOpts) ([]servedLine, error) {
	if o.mode != modeCold && o.mode != modeWarm && o.mode != modeNativeWarm {
		return nil, fmt.Errorf("served: -mode %q: use cold (worker pool off), warm (pool on) or native-warm (pool on, worker serve -unsafe-native-bench)", o.mode)
	}
	if o.storage != storageRedis && o.storage != storageS3 {
		return nil, fmt.Errorf("served: -storage %q: use redis or s3 (the stack's -blobs)", o.storage)
	}
	// pool waits for the pool to hold want (nil: what it keeps now).
	pool := func(fallback time.Duration, want map[string]float64) map[string]float64 {
		if o.mode == modeCold {
			return poolSnapshot(ctx, o.metrics)
		}
		return waitPool(ctx, o.metrics, o.poolWait, fallback, want)
	}
	// The first wait also covers a pool that is still filling after the
	// worker started; without the metric it is a fixed pause.
	fallback := 20 * time.Second
	var lines []servedLine
	for _, r := range o.renderers {
		input, desc, err := servedInput(r)
		if err != nil {
			return nil, err
		}
		body := jobBody(r, input)
		// A failed job does not end the run (the other lines still count,
		// and on a loaded host a Chromium job can time out): it is counted
		// in the line, its first error printed, and the run fails at the end.
		var mu sync.Mutex
		failed := 0
		try := func() bool {
			err := api.render(ctx, r, body)
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				if failed++; failed == 1 {
					fmt.Fprintf(os.Stderr, "bench: served %s %s: %v\n", o.mode, r, err)
				}
			}
			return err == nil
		}
		pool(fallback, nil)
		fallback = 0
		try() // warm-up

		idle := pool(0, nil)
		modes0 := jobModes(ctx, o.metrics, r)
		m0 := scrape(ctx, o.metrics)
		var serial []time.Duration
		for i := 0; i < o.serial; i++ {
			t0 := time.Now()
			if try() {
				serial = append(serial, time.Since(t0))
			}
		}
		// The worker observes a job's phases and wait before it reports
		// the job, so they are all in by now.
		split := serialSplit(m0, scrape(ctx, o.metrics), r, serial)

		before := pool(0, nil)
		cpu0, steal0, err := hostCPU()
		if err != nil {
			return nil, err
		}
		done := 0
		t0 := time.Now()
		fanOut(o.jobs, o.concurrency, func() {
			if try() {
				mu.Lock()
				done++
				mu.Unlock()
			}
		})
		elapsed := time.Since(t0)
		window := "throughput"
		// Until the pool holds again what it held as the window began:
		// the refills of the sandboxes the jobs took, not the growth
		// their burst caused (a grown pool's extra sandboxes are not
		// these jobs' cost).
		if o.mode != modeCold && pool(0, before) != nil {
			window = "throughput+refill"
		}
		cpu1, steal1, err := hostCPU()
		if err != nil {
			return nil, err
		}
		modes := modesSince(ctx, o.metrics, r, modes0, o.serial+o.jobs)

		l := servedLine{
			Bench: "served", Renderer: r, Mode: o.mode, Storage: o.storage,
			JobsPerS:    round2(float64(done) / elapsed.Seconds()),
			Concurrency: o.concurrency,
			CPUPerJob:   round2((cpu1 - cpu0) / float64(o.jobs)),
			Serial:      o.serial, Jobs: o.jobs, CPUWindow: window, Input: desc,
			StealPerJob: round2((steal1 - steal0) / float64(o.jobs)),
			PoolIdle:    idle, Modes: modes, SerialMean: split, Failed: failed, Time: stamp,
		}
		if len(serial) > 0 {
			l.P50, l.P99 = ms(pct(serial, 50)), ms(pct(serial, 99))
		}
		if err := out.Encode(l); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// hostCPU is the CPU time the whole host has spent so far, in seconds:
// user+nice+system+irq+softirq from /proc/stat's "cpu" line, and apart
// the steal time (time the hypervisor ran something else while this VM's
// cores had work). It is host-wide — the API, the worker, its sandboxes,
// Redis, this benchmark and anything else on the machine — so run the
// benchmark on a quiet host. /proc/stat counts in USER_HZ, which Linux
// fixes at 100 for userspace.
func hostCPU() (busy, steal float64, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("reading /proc/stat: %w", err)
	}
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	// user nice system (idle iowait) irq softirq, then steal.
	var jiffies [9]float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		if jiffies[i], err = strconv.ParseFloat(fields[i], 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i, line, err)
		}
	}
	busy = jiffies[1] + jiffies[2] + jiffies[3] + jiffies[6] + jiffies[7]
	return busy / 100, jiffies[8] / 100, nil
}

// sample is one series of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads the worker's metrics; nil when the URL is unset or
// unreachable.
func scrape(ctx context.Context, url string) []sample {
	if url == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	return parseMetrics(bufio.NewScanner(resp.Body))
}

// parseMetrics reads `name{k="v",…} value` lines of the text format (the
// worker's label values hold no commas or quotes) and skips the rest.
func parseMetrics(sc *bufio.Scanner) []sample {
	var out []sample
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil || len(fields) < 2 {
			continue
		}
		name, rest, _ := strings.Cut(fields[0], "{")
		labels := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		out = append(out, sample{name, labels, v})
	}
	return out
}

// byLabel sums the series called name by the value of label, over the
// series whose other labels match where.
func byLabel(ss []sample, name, label string, where map[string]string) map[string]float64 {
	var out map[string]float64
next:
	for _, s := range ss {
		if s.name != name {
			continue
		}
		for k, v := range where {
			if s.labels[k] != v {
				continue next
			}
		}
		if l, ok := s.labels[label]; ok {
			if out == nil {
				out = map[string]float64{}
			}
			out[l] += s.value
		}
	}
	return out
}

// serialSplit is servedLine.SerialMean: the worker's queue wait and
// sandbox phases over the serial jobs (metrics before and after), per job,
// beside the jobs' mean latency; nil without metrics or jobs.
func serialSplit(before, after []sample, renderer string, serial []time.Duration) map[string]float64 {
	if before == nil || after == nil || len(serial) == 0 {
		return nil
	}
	n := float64(len(serial))
	var total time.Duration
	for _, d := range serial {
		total += d
	}
	out := map[string]float64{"total": ms(total / time.Duration(len(serial)))}
	delta := func(name, label string, where map[string]string) map[string]float64 {
		a, b := byLabel(after, name, label, where), byLabel(before, name, label, where)
		for k := range a {
			a[k] -= b[k]
		}
		return a
	}
	rest := out["total"]
	for phase, sum := range delta("renderbox_sandbox_phase_seconds_sum", "phase", map[string]string{"renderer": renderer}) {
		if phase != "teardown" { // after the result: not in the latency
			out["sandbox_"+phase] = round2(sum * 1000 / n)
			rest -= out["sandbox_"+phase]
		}
	}
	// The wait has no labels: read by name.
	if w := sampleDelta(before, after, "renderbox_job_queue_wait_seconds_sum"); w >= 0 {
		out["queue_wait"] = round2(w * 1000 / n)
		rest -= out["queue_wait"]
	}
	out["other"] = round2(rest)
	return out
}

// sampleDelta is the change of an unlabelled sample; -1 if either lacks it.
func sampleDelta(before, after []sample, name string) float64 {
	find := func(ss []sample) (float64, bool) {
		for _, s := range ss {
			if s.name == name {
				return s.value, true
			}
		}
		return 0, false
	}
	a, ok1 := find(after)
	b, ok2 := find(before)
	if !ok1 || !ok2 {
		return -1
	}
	return a - b
}

// poolSnapshot is renderbox_pool_idle per family; nil for a worker without
// a pool (or unknown metrics).
func poolSnapshot(ctx context.Context, url string) map[string]float64 {
	return byLabel(scrape(ctx, url), "renderbox_pool_idle", "family", nil)
}

// waitPool polls the worker's metrics until every family's pool holds what
// it keeps now (renderbox_pool_target, which grows with demand; the
// operator's renderbox_pool_size from a worker without it; one sandbox if
// neither is exported; want instead when not nil), or holds at least one and has not changed for 30 s (a
// memory budget can keep a pool below its size), or d passes (then it
// says so and goes on: the line records what the pool held). When the
// worker exposes no pool metric it waits fallback instead. It returns the
// last idle counts.
func waitPool(ctx context.Context, url string, d, fallback time.Duration, want map[string]float64) map[string]float64 {
	const stall = 30 * time.Second
	deadline := time.Now().Add(d)
	var last map[string]float64
	changed := time.Now()
	for {
		ss := scrape(ctx, url)
		idle := byLabel(ss, "renderbox_pool_idle", "family", nil)
		if idle == nil {
			if fallback > 0 {
				fmt.Fprintf(os.Stderr, "bench: no renderbox_pool_idle at %q; waiting %s for the pool instead\n", url, fallback)
				time.Sleep(fallback)
			}
			return nil
		}
		if !maps.Equal(idle, last) {
			last, changed = idle, time.Now()
		}
		size := want
		if size == nil {
			size = byLabel(ss, "renderbox_pool_target", "family", nil)
		}
		if size == nil {
			size = byLabel(ss, "renderbox_pool_size", "family", nil)
		}
		full, some := true, true
		for fam, v := range idle {
			want, ok := size[fam]
			if !ok {
				want = 1
			}
			full = full && v >= want
			some = some && (v >= 1 || want == 0)
		}
		if full || (some && time.Since(changed) > stall) {
			return idle
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "bench: the pool is not full after %s: idle %v of %v; going on\n", d, idle, size)
			return idle
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// jobModes is renderbox_worker_jobs_total of renderer by how its sandbox
// was made (cold, prebooted, restored); nil if the worker does not say.
func jobModes(ctx context.Context, url, renderer string) map[string]float64 {
	return byLabel(scrape(ctx, url), "renderbox_worker_jobs_total", "mode", map[string]string{"renderer": renderer})
}

// modesSince is how many of renderer's jobs ran in each mode since
// before, once the worker has counted want of them (it counts a job just
// after reporting it, so give it a moment).
func modesSince(ctx context.Context, url, renderer string, before map[string]float64, want int) map[string]float64 {
	if url == "" {
		return nil
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		after := jobModes(ctx, url, renderer)
		if after == nil {
			return nil
		}
		d, total := map[string]float64{}, 0.0
		for k, v := range after {
			if v-before[k] > 0 {
				d[k] = v - before[k]
				total += d[k]
			}
		}
		if int(total) >= want || time.Now().After(deadline) {
			return d
		}
	}
}

// summarize prints one summary line over this run's served lines: those
// in file (the earlier modes of the same make bench run) and cur (this
// mode's), the last line of a renderer and mode winning. Per renderer
// measured in both, warm over cold and warm over native-warm for each
// served figure: below 1 is better for latency and CPU, above 1 for
// throughput; against native-warm, 1 is what gVisor would cost if it
// cost nothing.
func summarize(out *json.Encoder, stamp, file string, cur []servedLine) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("summary: the run's earlier lines: %w", err)
	}
	defer f.Close()
	var lines []servedLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l servedLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Bench == "served" {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("summary: reading %s: %w", file, err)
	}
	return out.Encode(summary(stamp, append(lines, cur...)))
}

// summary is the summary line of lines: warm_over_cold and
// warm_over_native_warm over the lines with documents in Redis, and
// s3_over_redis (warm with an object store over warm with Redis), each
// only with the renderers measured in both of its modes (absent when none
// was).
func summary(stamp string, lines []servedLine) map[string]any {
	by := map[string]map[string]servedLine{}
	for _, l := range lines {
		key := l.Mode
		if l.Storage == storageS3 {
			key += "/" + storageS3
		}
		if by[key] == nil {
			by[key] = map[string]servedLine{}
		}
		by[key][l.Renderer] = l
	}
	ratios := func(num, over string) map[string]map[string]float64 {
		var r map[string]map[string]float64
		for name, w := range by[num] {
			o, ok := by[over][name]
			if !ok {
				continue
			}
			if r == nil {
				r = map[string]map[string]float64{}
			}
			r[name] = map[string]float64{
				"p50_ms": div(w.P50, o.P50), "p99_ms": div(w.P99, o.P99),
				"jobs_per_s": div(w.JobsPerS, o.JobsPerS), "cpu_s_per_job": div(w.CPUPerJob, o.CPUPerJob),
			}
		}
		return r
	}
	line := map[string]any{"time": stamp, "bench": "summary"}
	if r := ratios(modeWarm, modeCold); r != nil {
		line["warm_over_cold"] = r
	}
	if r := ratios(modeWarm, modeNativeWarm); r != nil {
		line["warm_over_native_warm"] = r
	}
	if r := ratios(modeWarm+"/"+storageS3, modeWarm); r != nil {
		line["s3_over_redis"] = r
	}
	return line
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// div is a/b to two places; 0 when b is 0 (JSON has no infinity).
func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round2(a / b)
}
