//go:build !unit

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// poolArgs turn the worker's pool on: one Chromium restored from a
// checkpoint, one pdftoppm started ahead, one light sandbox pre-booted.
var poolArgs = []string{"-pool-size", "chromium=1,office=0,pdf=1,light=1", "-pool-restore", "chromium"}

// waitPoolFull waits until the worker says each of its pool's families is
// full (once, in its log).
func waitPoolFull(t *testing.T, s *stack) {
	t.Helper()
	waitFor(t, "the pool to fill", 4*time.Minute, func() bool {
		full := map[string]bool{}
		for _, line := range strings.Split(s.worker.output(), "\n") {
			if strings.Contains(line, `"msg":"pool: family full"`) {
				for _, f := range []string{"chromium", "light"} {
					full[f] = full[f] || strings.Contains(line, `"family":"`+f+`"`)
				}
			}
		}
		return full["chromium"] && full["light"]
	})
}

// The escape attempts, run as a job from a pre-booted sandbox, are refused
// as from a cold one, and the job says where it ran.
func TestEscapeProbeFromAPooledSandbox(t *testing.T) {
	s := newStack(t, stackOpts{apiArgs: []string{"-diagnostics"}, workerArgs: poolArgs})
	waitPoolFull(t, s)
	c := s.client
	key := s.key("mallory")
	_, j := submitJSON(t, c, key, "sandbox-probe", []byte("probe\n"), nil, "?wait=60", nil)
	if j.State != "succeeded" || len(j.Outputs) != 1 {
		t.Fatalf("probe job = %s %+v, want succeeded with escapes.json", j.State, j.Error)
	}
	if j.SandboxMode != sandbox.ModePrebooted {
		t.Errorf("the probe ran in a %q sandbox, want prebooted", j.SandboxMode)
	}
	checkEscapeReport(t, c, key, j)
	// A restored Chromium prints, and says so.
	_, h := submitJSON(t, c, key, "html-pdf", samples.HTMLTable(30), nil, "?wait=60", nil)
	if h.State != "succeeded" || h.SandboxMode != sandbox.ModeRestored {
		t.Errorf("html-pdf with the pool on: %s in a %q sandbox (%+v), want succeeded in a restored one", h.State, h.SandboxMode, h.Error)
	}
}

// A worker killed with kill -9 leaves its pool's sandboxes and checkpoint
// image behind; its successor reaps every one of them before it serves.
func TestKilledPoolWorkerLeavesNothingItsSuccessorKeeps(t *testing.T) {
	s := newStack(t, stackOpts{workerArgs: poolArgs})
	waitPoolFull(t, s)
	if err := s.worker.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = s.worker.cmd.Wait()
	m, err := sandbox.NewManager(s.workerSB)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	left, err := m.Leftovers(ctx)
	if err != nil || len(left) < 3 {
		t.Fatalf("after kill -9, leftovers = %v (%v); want the pool's sandboxes, bundles, cgroups and image", left, err)
	}
	t.Logf("left by the killed worker: %v", left)
	// The successor (pool off, so nothing of its own exists) reaps them all.
	s.startWorker()
	if left, err := m.Leftovers(ctx); err != nil || len(left) > 0 {
		t.Errorf("after the successor started, left: %v (%v)", left, err)
	}
	c := s.client
	key := s.key("ivan")
	if _, j := submitJSON(t, c, key, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "?wait=60", nil); j.State != "succeeded" || j.SandboxMode != sandbox.ModeCold {
		t.Errorf("a job on the successor: %s in a %q sandbox", j.State, j.SandboxMode)
	}
}
