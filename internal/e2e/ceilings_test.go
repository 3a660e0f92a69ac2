//go:build !unit

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
)

// An operator's ceiling lets a job past the catalogue's limit finish:
// with -ceilings html-pdf:timeout=4m on the API and the worker, a page
// printed after a 180 s wait (refused outright under the catalogue's
// 60 s) succeeds through the asynchronous path, and the raised limit is
// what GET /v1/renderers and the served contract publish.
func TestRaisedCeilingLetsALongJobFinish(t *testing.T) {
	t.Parallel() // three minutes, mostly waiting
	ceilings := []string{"-ceilings", "html-pdf:timeout=4m"}
	s := newStack(t, stackOpts{apiArgs: ceilings, workerArgs: append([]string{"-pool-size", "none"}, ceilings...)})
	c, key := s.client, s.key("long")

	var cat struct {
		Renderers []struct {
			Name   string `json:"name"`
			Limits struct {
				TimeoutSeconds float64 `json:"timeout_seconds"`
			} `json:"limits"`
		} `json:"renderers"`
	}
	c.do("GET", "/v1/renderers", key, "", nil, nil).json(t, &cat)
	for _, r := range cat.Renderers {
		if want := map[string]float64{"html-pdf": 240, "html-png": 60}[r.Name]; want != 0 && r.Limits.TimeoutSeconds != want {
			t.Errorf("GET /v1/renderers: %s's timeout %g s, want %g", r.Name, r.Limits.TimeoutSeconds, want)
		}
	}
	spec := string(c.do("GET", "/openapi.yaml", "", "", nil, nil).Body)
	i := strings.Index(spec, "    HtmlPdfLimits:")
	if i < 0 || !strings.Contains(spec[i:i+min(len(spec)-i, 800)], "maximum: 240\n") {
		t.Errorf("the served contract's HtmlPdfLimits does not say the raised 240 s:\n%.800s", spec[max(0, i):])
	}

	t0 := time.Now()
	r, j := submitJSON(t, c, key, "html-pdf", samples.HTML("A long report", "Printed after three minutes."), map[string]any{"wait_delay": 180}, "?wait=10", nil)
	if r.Status != 202 || j.State == "failed" {
		t.Fatalf("submitting: %d %s", r.Status, r.Body)
	}
	waitFor(t, "the three-minute job to end", 5*time.Minute, func() bool {
		j = getJob(t, c, key, j.ID, "?wait=60")
		return j.terminal()
	})
	took := time.Since(t0)
	if j.State != "succeeded" || len(j.Outputs) != 1 || took < 180*time.Second {
		t.Fatalf("the long job: %s %+v after %v, want succeeded after at least 180 s", j.State, j.Error, took.Round(time.Second))
	}
	t.Logf("the three-minute job succeeded after %v", took.Round(time.Second))
}
