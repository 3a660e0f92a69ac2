package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// benchEndToEnd measures, against a running API and worker, pdf-png of a
// one-page PDF end to end (submit with ?wait=, download the output) next
// to the same job run directly in a sandbox. The two alternate, one pair
// at a time with the order swapped each pair, so that the host's drift
// over the run (its speed moves from minute to minute) falls on both
// alike: run as two blocks of 20, the same binaries gave -44 to +21 ms
// added at p50 within a quarter of an hour. A direct run is timed to its
// result, as a worker reports one, and its sandbox's teardown after that
// is not counted, as a served job's is not. With the worker's metrics,
// serial_mean_ms splits the served jobs' mean as the served lines' does.
func benchEndToEnd(ctx context.Context, out *json.Encoder, stamp string, m *sandbox.Manager, base, key, metrics string, n int) error {
	pdf := samples.PDF("renderbox benchmark", 1)
	api := newAPIClient(base, key)
	body := jobBody("pdf-png", pdf)
	var e2e, direct []time.Duration
	m0 := scrape(ctx, metrics)
	served := func() error {
		t0 := time.Now()
		if err := api.render(ctx, "pdf-png", body); err != nil {
			return err
		}
		e2e = append(e2e, time.Since(t0))
		return nil
	}
	alone := func() error {
		d, err := directPDFPNG(ctx, m, pdf)
		direct = append(direct, d)
		return err
	}
	for i := 0; i < n; i++ {
		first, second := alone, served
		if i%2 == 1 {
			first, second = served, alone
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	line := map[string]any{
		"time": stamp, "bench": "api_end_to_end", "renderer": "pdf-png", "n": n,
		"api_total_ms": stats(e2e), "direct_sandbox_ms": stats(direct),
		"added_ms_p50": ms(pct(e2e, 50) - pct(direct, 50)), "added_ms_p99": ms(pct(e2e, 99) - pct(direct, 99)),
		"ratio_p50": ratio(pct(e2e, 50), pct(direct, 50)),
	}
	if split := serialSplit(m0, scrape(ctx, metrics), "pdf-png", e2e); split != nil {
		line["serial_mean_ms"] = split
	}
	return out.Encode(line)
}

// benchIntake measures how many jobs a second the API accepts: intake
// small SVG jobs from 8 clients at once, each through every check a
// submission meets. make bench runs it with no worker serving, so that
// what it measures is the API's (and Redis's, and the ledger's) work,
// not the cores' share left over by a worker rendering the jobs as they
// arrive; the jobs are canceled afterwards.
func benchIntake(ctx context.Context, out *json.Encoder, stamp, base, key string, intake int) error {
	api := newAPIClient(base, key)
	// Intake: accepted jobs per second, 8 clients, a small SVG each. The
	// jobs are canceled afterwards so the worker does not render them all.
	svg := jobBody("svg-png", samples.SVG(20, 20, 0, 0, 5))
	var mu sync.Mutex
	var ids []string
	accepted, refused := 0, 0
	t0 := time.Now()
	fanOut(intake, 8, func() {
		j, status, err := api.call(ctx, "POST", "/v1/jobs", svg)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && status == 202 {
			accepted++
			if id, ok := j["id"].(string); ok {
				ids = append(ids, id)
			}
		} else {
			refused++
		}
	})
	elapsed := time.Since(t0)
	for _, id := range ids {
		_, _, _ = api.call(ctx, "DELETE", "/v1/jobs/"+id, nil)
	}
	return out.Encode(map[string]any{
		"time": stamp, "bench": "api_intake", "clients": 8, "submitted": intake, "accepted": accepted, "refused": refused,
		"seconds": math.Round(elapsed.Seconds()*1000) / 1000, "accepted_per_second": float64(int(float64(accepted)/elapsed.Seconds()*10)) / 10,
	})
}

// directPDFPNG runs pdf-png of pdf in a fresh sandbox, as a worker runs
// a job, and returns how long it took to the result: the sandbox's
// teardown, which a worker does after reporting, is waited for but not
// counted.
func directPDFPNG(ctx context.Context, m *sandbox.Manager, pdf []byte) (time.Duration, error) {
	r, err := render.Lookup(benchCases()[0].renderer) // pdf-png
	if err != nil {
		return 0, err
	}
	plan, err := r.Prepare(pdf, nil, render.LimitRequest{})
	if err != nil {
		return 0, err
	}
	plan.Job.Input = bytes.NewReader(pdf)
	return runPlan(ctx, m, r, plan, pdf)
}

// fanOut calls f n times from workers goroutines at once and returns when
// every call has.
func fanOut(n, workers int, f func()) {
	work := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				f()
			}
		}()
	}
	wg.Wait()
}
