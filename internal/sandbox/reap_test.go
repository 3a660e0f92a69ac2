//go:build !unit

package sandbox_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// A successor's Reap removes the containers, bundles and cgroups of a
// worker that crashed on the same state dir.
func TestReapRemovesWhatACrashedWorkerLeft(t *testing.T) {
	t.Parallel()
	state := "/run/renderbox-test/reap-" + filepath.Base(t.TempDir())
	cfg := sandbox.Config{StateDir: state, CgroupParent: "renderbox-test-reap-" + filepath.Base(state)}
	crashed := testenv.Manager(t, cfg)
	for i := 0; i < 2; i++ {
		sb, err := crashed.Prepare(context.Background(), sandbox.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := sb.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		// Not destroyed: the worker "crashed" here.
	}
	left, err := crashed.Leftovers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) < 4 {
		t.Fatalf("leftovers before reaping = %v, want 2 containers, 2 bundles and their cgroups", left)
	}
	successor, err := sandbox.NewManager(sandbox.Config{
		Runsc: crashed.Runsc().Path, Rootfs: crashed.Config().Rootfs, StateDir: state, CgroupParent: cfg.CgroupParent,
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := successor.Reap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("reaped %d containers, want 2", n)
	}
	if left, _ := successor.Leftovers(context.Background()); len(left) != 0 {
		t.Errorf("after reaping: %v", left)
	}
}
