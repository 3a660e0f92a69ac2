package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// benchAPI measures, against a running API and worker: pdf-png of a
// one-page PDF end to end (submit with ?wait=, download the output) next to
// the same job run directly in a sandbox, and how many jobs per second the
// API accepts.
func benchAPI(ctx context.Context, out *json.Encoder, stamp string, m *sandbox.Manager, base, key string, n, intake int) error {
	pdf := samples.PDF("renderbox benchmark", 1)
	direct, err := directPDFPNG(ctx, m, pdf, n)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	post := func(body []byte, query string) (map[string]any, int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/jobs"+query, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		var j map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&j)
		return j, resp.StatusCode, nil
	}
	body, _ := json.Marshal(map[string]any{"renderer": "pdf-png", "input_base64": base64.StdEncoding.EncodeToString(pdf)})
	var e2e []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		j, status, err := post(body, "?wait=60")
		if err != nil {
			return err
		}
		if status != 200 || j["state"] != "succeeded" {
			return fmt.Errorf("pdf-png through the API: status %d, job %v", status, j)
		}
		outs, _ := j["outputs"].([]any)
		if len(outs) != 1 {
			return fmt.Errorf("pdf-png through the API: outputs %v", outs)
		}
		url, _ := outs[0].(map[string]any)["url"].(string)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		e2e = append(e2e, time.Since(t0))
	}
	_ = out.Encode(map[string]any{
		"time": stamp, "bench": "api_end_to_end", "renderer": "pdf-png", "n": n,
		"api_total_ms": stats(e2e), "direct_sandbox_ms": stats(direct),
		"added_ms_p50": ms(pct(e2e, 50) - pct(direct, 50)), "added_ms_p99": ms(pct(e2e, 99) - pct(direct, 99)),
		"ratio_p50": ratio(pct(e2e, 50), pct(direct, 50)),
	})

	// Intake: accepted jobs per second, 8 clients, a small SVG each. The
	// jobs are canceled afterwards so the worker does not render them all.
	svg, _ := json.Marshal(map[string]any{"renderer": "svg-png", "input_base64": base64.StdEncoding.EncodeToString(samples.SVG(20, 20, 0, 0, 5))})
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	work := make(chan struct{}, intake)
	for i := 0; i < intake; i++ {
		work <- struct{}{}
	}
	close(work)
	accepted, refused := 0, 0
	t0 := time.Now()
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				j, status, err := post(svg, "")
				mu.Lock()
				if err == nil && status == 202 {
					accepted++
					if id, ok := j["id"].(string); ok {
						ids = append(ids, id)
					}
				} else {
					refused++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	for _, id := range ids {
		req, _ := http.NewRequestWithContext(ctx, "DELETE", base+"/v1/jobs/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	return out.Encode(map[string]any{
		"time": stamp, "bench": "api_intake", "clients": 8, "submitted": intake, "accepted": accepted, "refused": refused,
		"seconds": math.Round(elapsed.Seconds()*1000) / 1000, "accepted_per_second": float64(int(float64(accepted)/elapsed.Seconds()*10)) / 10,
	})
}

func directPDFPNG(ctx context.Context, m *sandbox.Manager, pdf []byte, n int) ([]time.Duration, error) {
	c := benchCases()[0] // pdf-png
	var ds []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := runOnce(ctx, m, c.renderer, pdf); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}
