//go:build !unit

package e2e

import (
	"encoding/json"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/wire"
)

// The escape attempts run as a job: submitted over HTTP, queued, run by the
// worker from a renderer's place in a fresh sandbox, the report returned as
// the job's output. Every attempt must have been refused or contained.
func TestEscapeProbeRunsAsAJob(t *testing.T) {
	s := newStack(t, stackOpts{apiArgs: []string{"-diagnostics"}})
	c := s.client
	key := s.key("mallory")
	_, j := submitJSON(t, c, key, "sandbox-probe", []byte("probe\n"), nil, "?wait=60", nil)
	if j.State != "succeeded" || len(j.Outputs) != 1 || j.Outputs[0].Name != "escapes.json" {
		t.Fatalf("probe job = %s %+v %+v, want succeeded with escapes.json", j.State, j.Error, j.Outputs)
	}
	checkEscapeReport(t, c, key, j)
	// The worker is unharmed and nothing is left behind.
	if _, next := submitJSON(t, c, key, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "?wait=30", nil); next.State != "succeeded" {
		t.Errorf("the job after the probe: %s %+v", next.State, next.Error)
	}
	waitSandboxesGone(t, s)
}

// checkEscapeReport fails t for each escape attempt of a sandbox-probe
// job's report (escapes.json) that was not refused or contained.
func checkEscapeReport(t *testing.T, c *client, key string, j jobJSON) {
	t.Helper()
	out := c.do("GET", j.Outputs[0].URL, key, "", nil, nil)
	var attempts []wire.Attempt
	if err := json.Unmarshal(out.Body, &attempts); err != nil {
		t.Fatalf("escapes.json: %v\n%s", err, tail(out.Body))
	}
	r, _ := render.LookupWithDiagnostics("sandbox-probe")
	for _, ch := range sandbox.CheckEscapes(attempts, r.Limits) {
		if !ch.Pass {
			t.Errorf("%s: %s", ch.Name, ch.Detail)
		} else {
			t.Logf("%-50s %s", ch.Name, ch.Detail)
		}
	}
}
