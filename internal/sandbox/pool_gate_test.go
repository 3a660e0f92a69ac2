//go:build !unit

package sandbox_test

// The gate's rules in real pools (docs/pool.md, "The gate").

import (
	"context"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// TestFillsGiveWayToRenders: while a family holds half its size ready, a
// fill does not start while a job renders; below half, fills run whatever
// renders.
func TestFillsGiveWayToRenders(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	containers := func() int {
		cs, err := m.Runsc().List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	job := func(sb *sandbox.Sandbox) {
		t.Helper()
		if _, err := m.RunIn(context.Background(), sb, shJob("true", sb.Limits)); err != nil {
			t.Fatalf("a job in a filled sandbox: %v", err)
		}
	}

	// A job that took one of two: the fill waits for its render.
	p := lightPool(t, m, 2, lim)
	a := take(t, p, lim)
	time.Sleep(time.Second)
	if n := containers(); n != 2 {
		t.Errorf("while a job holds its sandbox, %d containers, want 2: a fill started beside it", n)
	}
	job(a) // its render ends: the fill starts
	waitReady(t, p, 2)

	// Both taken: below half, the fill runs though two jobs hold theirs.
	a, b := take(t, p, lim), take(t, p, lim)
	waitReady(t, p, 1)
	job(a)
	job(b)
}

// A restored sandbox still settling is not part of the family's reserve:
// while the one left is settling, the fill runs beside a render rather
// than leave the cores to a job that waits for it (docs/pool.md, "The
// gate").
func TestSettlingSandboxesAreNoReserve(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	p := testenv.Pool(t, m, sandbox.PoolFamily{Name: "light", Limits: lim, Size: 2, Restore: true, Settle: time.Minute})
	waitReady(t, p, 2)
	// No FillWait: the job takes one unsettled; its render holds until
	// the end of the test.
	a, mode := p.Take(context.Background(), "light", lim)
	if a == nil || mode != sandbox.ModeRestored {
		t.Fatalf("Take = %v, %q; want a restored sandbox", a, mode)
	}
	t.Log("the family's one idle sandbox settles for a minute while a job renders: its fill must run beside the render")
	t.Logf("refilled beside the render in %s", waitIdle(t, p, 2, 20*time.Second).Round(time.Millisecond))
	if _, err := m.RunIn(context.Background(), a, shJob("true", lim)); err != nil {
		t.Errorf("the job: %v", err)
	}
}
