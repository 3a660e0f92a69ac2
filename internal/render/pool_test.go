package render_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// poolOf starts a pool of one family with the given size and restore mode
// and waits until it holds n ready sandboxes.
func poolOf(t *testing.T, m *sandbox.Manager, name string, size int, restore bool) *sandbox.Pool {
	t.Helper()
	var fam sandbox.PoolFamily
	for _, f := range render.PoolFamilies() {
		if f.Name == name {
			fam = f
		}
	}
	fam.Size, fam.Restore = size, restore
	p := testenv.Pool(t, m, fam)
	waitIdle(t, p, name, size, 3*time.Minute)
	return p
}

func waitIdle(t *testing.T, p *sandbox.Pool, name string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for p.Idle(name) < n {
		if time.Now().After(deadline) {
			t.Fatalf("pool %s: %d idle after %s, want %d", name, p.Idle(name), within, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// renderIn renders input with the named renderer in a sandbox from the
// pool, and fails unless the pool had one of mode.
func renderIn(t *testing.T, m *sandbox.Manager, p *sandbox.Pool, name string, input []byte, mode string) (map[string][]byte, time.Duration) {
	t.Helper()
	r, err := render.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Prepare(input, nil, render.LimitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	plan.Job.Input = bytes.NewReader(input)
	t0 := time.Now()
	sb, got := p.Take(context.Background(), r.Family(), plan.Job.Limits)
	if sb == nil || got != mode {
		t.Fatalf("pool gave %v in mode %q, want one in mode %q", sb, got, mode)
	}
	res, err := m.RunIn(context.Background(), sb, plan.Job)
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("%s in a %s sandbox: %v", name, mode, err)
	}
	out := map[string][]byte{}
	for _, f := range res.Response.Files {
		out[r.OutputName(f.Name)] = f.Data
	}
	return out, took
}

func TestWarmChromiumPrints(t *testing.T) {
	for _, restore := range []bool{false, true} {
		mode := map[bool]string{false: sandbox.ModePrebooted, true: sandbox.ModeRestored}[restore]
		t.Run(mode, func(t *testing.T) {
			m := testenv.Manager(t, sandbox.Config{})
			p := poolOf(t, m, render.FamilyChromium, 1, restore)
			for i := 0; i < 2; i++ {
				waitIdle(t, p, render.FamilyChromium, 1, 2*time.Minute)
				out, took := renderIn(t, m, p, "html-pdf", samples.HTMLTable(30), mode)
				text := pdfText(t, m, out["output.pdf"])
				if !strings.Contains(text, "row 30") {
					t.Errorf("job %d: the PDF's text lacks the table's last row: %q", i, text)
				}
				t.Logf("job %d in a %s sandbox: %s", i, mode, took)
			}
		})
	}
}
