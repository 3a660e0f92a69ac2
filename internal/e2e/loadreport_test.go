//go:build !unit

package e2e

// A mixed load through the real API, queue and worker: many clients, API
// limits that bite, and then the books are checked — every job ended as
// it should, exactly once, nothing was left behind on the worker host, and
// the worker's memory did not grow with the number of jobs.
//
//	go test ./internal/e2e -run TestLoadMixedJobs                                # reduced, ~2 min
//	go test ./internal/e2e -run TestLoadMixedJobs -load.jobs 1000 -timeout 60m   # full size

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The load test's measurements: the worker's memory, latencies, the report.

// startRSSSampler reads pid's VmRSS every interval until stop.
func startRSSSampler(t *testing.T, pid int, interval time.Duration) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{}), done: make(chan []rssSample, 1)}
	go func() {
		var out []rssSample
		t0 := time.Now()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if rss, err := vmRSS(pid); err != nil {
				t.Errorf("reading the worker's memory: %v", err)
			} else {
				out = append(out, rssSample{time.Since(t0), rss})
			}
			select {
			case <-s.stopc:
				s.done <- out
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() []rssSample {
	close(s.stopc)
	return <-s.done
}

// vmRSS reads a process's resident set size from /proc/<pid>/status.
func vmRSS(pid int) (int64, error) { return procStatusBytes(pid, "VmRSS") }

// procStatusBytes reads a memory field of /proc/<pid>/status (VmRSS,
// VmHWM, …) in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// checkMemoryFlat compares the worker's memory late in the run with its
// level early on, after a warm-up, and returns both and the peak.
//
// The bound: late ≤ early + max(25% of early, 16 MiB), on medians, so a
// passing spike does not count. A Go process's RSS is not its live heap:
// the GC lets the heap grow to twice the live data before collecting, and
// freed pages go back to the kernel only lazily, so RSS rises to the
// high-water mark of a few concurrent jobs' inputs and outputs and of the
// start-up checks (hashing the rootfs) and comes down slowly; the floor
// absorbs that. Measured here: a steady ~20 MiB, ±1 MiB from the first
// tenth of a 1000-job run to the last, with spikes to ~34 MiB. What the
// bound does not absorb is growth with the number of jobs. About 65% of
// the jobs run between the two windows, so the full run (1000 jobs) fails
// on a leak of 25 KiB per job — an output buffer, a goroutine with its
// stacks; the reduced run (100) catches leaks of ~250 KiB per job.
func checkMemoryFlat(t *testing.T, samples []rssSample) (early, late, peak int64) {
	t.Helper()
	if len(samples) < 20 {
		t.Fatalf("only %d memory samples; the run was too short to judge the worker's memory", len(samples))
	}
	// Early: the 10%–35% stretch, once the pools, caches and first
	// sandboxes are warm. Late: the last quarter.
	n := len(samples)
	early = medianRSS(samples[n/10 : n*35/100])
	late = medianRSS(samples[n*3/4:])
	for _, s := range samples {
		peak = max(peak, s.rss)
	}
	if bound := early + max(early/4, 16<<20); late > bound {
		t.Errorf("the worker's memory grew from %s early to %s late (bound %s): a leak per job?", mib(early), mib(late), mib(bound))
	}
	return early, late, peak
}

func medianRSS(s []rssSample) int64 {
	v := make([]int64, len(s))
	for i, x := range s {
		v[i] = x.rss
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// rssByTenth is the median RSS of each tenth of the run, to show a trend.
func rssByTenth(s []rssSample) string {
	var parts []string
	for i := 0; i < 10; i++ {
		if part := s[i*len(s)/10 : (i+1)*len(s)/10]; len(part) > 0 {
			parts = append(parts, fmt.Sprintf("%.1f", float64(medianRSS(part))/(1<<20)))
		}
	}
	return strings.Join(parts, " ") + " MiB"
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// percentile is the nearest-rank p-th percentile of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// reportLoad logs the run's figures: throughput; latencies — the server's,
// from acceptance to the end in the ledger, and the client's, from its
// first try through refusals to that end; refusals; worker memory.
func reportLoad(t *testing.T, jobs []*loadJob, clients int, wall time.Duration, early, late, peak int64) {
	t.Helper()
	var server, clientSide, run, admission []time.Duration
	var busy time.Duration
	refused := map[int]int{}
	for _, j := range jobs {
		if f := j.final; f.FinishedAt != nil {
			server = append(server, f.FinishedAt.Sub(f.CreatedAt))
			clientSide = append(clientSide, f.FinishedAt.Sub(j.submitted))
			if f.StartedAt != nil {
				run = append(run, f.FinishedAt.Sub(*f.StartedAt))
				busy += f.FinishedAt.Sub(*f.StartedAt)
			}
		}
		admission = append(admission, j.accepted.Sub(j.submitted))
		for st, k := range j.refused {
			refused[st] += k
		}
	}
	slices.Sort(server)
	slices.Sort(clientSide)
	slices.Sort(run)
	slices.Sort(admission)
	round := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("load: %d jobs from %d clients in %v: %.2f jobs/s", len(jobs), clients, round(wall), float64(len(jobs))/wall.Seconds())
	t.Logf("accepted → ended (server): p50 %v, p99 %v, max %v", round(percentile(server, 50)), round(percentile(server, 99)), round(percentile(server, 100)))
	t.Logf("first try → ended (client, through refusals): p50 %v, p99 %v, max %v", round(percentile(clientSide, 50)), round(percentile(clientSide, 99)), round(percentile(clientSide, 100)))
	t.Logf("first try → accepted: p50 %v, p99 %v, max %v", round(percentile(admission, 50)), round(percentile(admission, 99)), round(percentile(admission, 100)))
	// Busy: the share of the worker's slots that held a running job;
	// low means the clients or the limits, not the worker, set the pace.
	t.Logf("started → ended (worker): p50 %v, p99 %v; worker slots busy %.0f%%", round(percentile(run, 50)), round(percentile(run, 99)), 100*busy.Seconds()/(workerSlots*wall.Seconds()))
	t.Logf("refusals honoured: %d × 429, %d × 503", refused[429], refused[503])
	t.Logf("worker RSS: early %s, late %s, max %s", mib(early), mib(late), mib(peak))
}

// checkRefusals checks that admission control bit: the limits were set so
// that both 429 and 503 happen, and without them the clients' retry path
// (same request, same Idempotency-Key, after Retry-After) went untested.
func checkRefusals(t *testing.T, jobs []*loadJob) {
	t.Helper()
	refused := map[int]int{}
	for _, j := range jobs {
		for st, k := range j.refused {
			refused[st] += k
		}
	}
	if refused[429] == 0 || refused[503] == 0 {
		t.Errorf("the run saw %d 429s and %d 503s; the limits (-rate %s -burst %s, -max-queue-depth %d) should produce both",
			refused[429], refused[503], loadRate, loadBurst, loadQueueDepth)
	}
}
