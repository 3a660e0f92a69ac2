//go:build !unit

package render_test

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
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
func renderIn(t *testing.T, m *sandbox.Manager, p *sandbox.Pool, name string, input []byte, opts map[string]any, mode string) (map[string][]byte, time.Duration) {
	t.Helper()
	r, plan := mustPlan(t, name, input, opts)
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
	// The agent's marks (ms since the browser started) say where the time went.
	var marks []string
	for _, l := range strings.Split(res.Response.Result.StderrTail, "\n") {
		if strings.HasPrefix(l, "renderbox-agent: ") {
			marks = append(marks, strings.TrimPrefix(l, "renderbox-agent: "))
		}
	}
	t.Logf("%s in a %s sandbox: %s (render %s, teardown %s; agent: %s)", name, mode, took, res.Timings.Render, res.Timings.Teardown, strings.Join(marks, ", "))
	return accepted(t, r, res.Response.Files), took
}

// Pages that leave state in the browser (a cookie, local storage, a cache
// entry) and pages that look for it.
var (
	leaveState = []byte(`<!doctype html><html><body><p id="o">left</p><script>
document.cookie = "rbxcookie=COOKIE-LEFT; max-age=86400";
localStorage.setItem("rbx", "STORAGE-LEFT");
document.getElementById("o").textContent = "left: [" + document.cookie + "] [" + localStorage.getItem("rbx") + "]";
</script></body></html>`)
	lookForState = []byte(`<!doctype html><html><body><p id="o">nothing</p><script>
document.getElementById("o").textContent = "seen: [" + document.cookie + "] [" + (localStorage.getItem("rbx") || "") + "]";
</script></body></html>`)
)

// A pooled Chromium, booted or restored, prints; and what one job's page
// leaves in the browser is absent in the next job's, from the same pool.
func TestWarmChromiumPrints(t *testing.T) {
	for _, restore := range []bool{false, true} {
		mode := map[bool]string{false: sandbox.ModePrebooted, true: sandbox.ModeRestored}[restore]
		t.Run(mode, func(t *testing.T) {
			m := testenv.Manager(t, sandbox.Config{})
			p := poolOf(t, m, render.FamilyChromium, 1, restore)
			out, _ := renderIn(t, m, p, "html-pdf", samples.HTMLTable(30), nil, mode)
			if text := pdfText(t, m, out["output.pdf"]); !strings.Contains(text, "row 30") {
				t.Errorf("the PDF's text lacks the table's last row: %q", text)
			}
			js := map[string]any{"javascript": true}
			waitIdle(t, p, render.FamilyChromium, 1, 2*time.Minute)
			out, _ = renderIn(t, m, p, "html-pdf", leaveState, js, mode)
			// Within one job the state is there: the check below can fail.
			if text := pdfText(t, m, out["output.pdf"]); !strings.Contains(text, "COOKIE-LEFT") || !strings.Contains(text, "STORAGE-LEFT") {
				t.Fatalf("the page that leaves state does not see its own: %q", text)
			}
			waitIdle(t, p, render.FamilyChromium, 1, 2*time.Minute)
			out, _ = renderIn(t, m, p, "html-pdf", lookForState, js, mode)
			text := pdfText(t, m, out["output.pdf"])
			if !strings.Contains(text, "seen: [") {
				t.Fatalf("the page that looks for state did not run: %q", text)
			}
			if strings.Contains(text, "COOKIE-LEFT") || strings.Contains(text, "STORAGE-LEFT") {
				t.Errorf("the next job sees the previous job's browser state: %q", text)
			}
		})
	}
}

// TestWarmOfficeConverts converts DOCX in sandboxes whose LibreOffice was
// booted before the job (soffice on its UNO pipe, the Python bridge warmed
// up), by a boot or restored from a checkpoint of one: the job only pays
// for the conversion. Measured here with huge pages: boot 5.9 CPU-s,
// restore 0.6, either job ≈ 0.3 s.
func TestWarmOfficeConverts(t *testing.T) {
	for _, restore := range []bool{false, true} {
		mode := map[bool]string{false: sandbox.ModePrebooted, true: sandbox.ModeRestored}[restore]
		t.Run(mode, func(t *testing.T) {
			m := testenv.Manager(t, sandbox.Config{})
			p := poolOf(t, m, render.FamilyOffice, 1, restore)
			for i := 0; i < 2; i++ {
				waitIdle(t, p, render.FamilyOffice, 1, 3*time.Minute)
				doc := samples.DOCX("Invoice 2026-117", "Total due: 42 EUR")
				out, took := renderIn(t, m, p, "office-pdf", doc, nil, mode)
				text := pdfText(t, m, out["output.pdf"])
				for _, want := range []string{"Invoice 2026-117", "Total due: 42 EUR"} {
					if !strings.Contains(text, want) {
						t.Errorf("job %d: pdftotext = %q, want %q in it", i, text, want)
					}
				}
				t.Logf("job %d in a %s sandbox: %s", i, mode, took)
			}
		})
	}
}

// A pdf family sandbox starts pdftoppm before its job: a pdf-png job with
// the default options and limits runs in it (Primed) and renders exactly
// what a cold sandbox renders; one with other options or a lower page
// limit has it killed and starts its own, with the same result as cold.
func TestPrimedPDFPNG(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	p := poolOf(t, m, render.FamilyPDF, 3, false)
	input := samples.PDF("primed", 3)
	for _, c := range []struct {
		opts   map[string]any
		lim    render.LimitRequest
		primed bool
	}{
		{nil, render.LimitRequest{}, true},
		{map[string]any{"dpi": 72}, render.LimitRequest{}, false},
		{nil, render.LimitRequest{MaxPages: 2}, false},
	} {
		r, err := render.Lookup("pdf-png")
		if err != nil {
			t.Fatal(err)
		}
		plan, err := r.Prepare(input, c.opts, c.lim)
		if err != nil {
			t.Fatal(err)
		}
		run := func(sb *sandbox.Sandbox) (*sandbox.Result, map[string][]byte) {
			t.Helper()
			job := plan.Job
			job.Input = bytes.NewReader(input)
			var res *sandbox.Result
			if sb == nil {
				res, err = m.Run(context.Background(), job)
			} else {
				res, err = m.RunIn(context.Background(), sb, job)
			}
			if err != nil {
				t.Fatalf("pdf-png %v %+v: %v", c.opts, c.lim, err)
			}
			return res, accepted(t, r, res.Response.Files)
		}
		sb, mode := p.Take(context.Background(), r.Family(), plan.Job.Limits)
		if sb == nil || mode != sandbox.ModePrebooted {
			t.Fatalf("pool gave %v in mode %q", sb, mode)
		}
		res, warm := run(sb)
		if res.Response.Result.Primed != c.primed {
			t.Errorf("pdf-png %v %+v: primed %v, want %v (stderr: %s)", c.opts, c.lim, res.Response.Result.Primed, c.primed, res.Response.Result.StderrTail)
		}
		cres, cold := run(nil)
		if cres.Response.Result.Primed {
			t.Errorf("a cold sandbox says its pdftoppm was primed")
		}
		if len(warm) == 0 || !reflect.DeepEqual(warm, cold) {
			t.Errorf("pdf-png %v %+v: %d outputs in the pool sandbox, %d cold, or they differ", c.opts, c.lim, len(warm), len(cold))
		}
	}
}

// What a pdf family sandbox starts is exactly a default pdf-png job's
// first step, so that jobs use it; another option changes the step.
func TestPrimedFamilies(t *testing.T) {
	var fam *sandbox.PoolFamily
	fams := render.PoolFamilies()
	for i := range fams {
		if fams[i].Name == render.FamilyPDF {
			fam = &fams[i]
		}
	}
	if fam == nil || fam.Warm.Kind != wire.WarmExec {
		t.Fatalf("no pdf family starting a program: %+v", fams)
	}
	r, plan := mustPlan(t, "pdf-png", samples.PDF("primed", 1), nil)
	if r.Family() != render.FamilyPDF {
		t.Errorf("pdf-png's family is %q", r.Family())
	}
	st := plan.Job.Request.Steps[0]
	if !slices.Equal(st.Argv, fam.Warm.Argv) || !slices.Equal(plan.Job.Request.Env, fam.Warm.Env) || st.Stdin == "" {
		t.Errorf("a default pdf-png job's step %+v (env %v) is not what the family starts: %+v", st, plan.Job.Request.Env, fam.Warm)
	}
	_, other := mustPlan(t, "pdf-png", samples.PDF("primed", 1), map[string]any{"dpi": 300})
	if slices.Equal(other.Job.Request.Steps[0].Argv, fam.Warm.Argv) {
		t.Errorf("a 300 dpi job's step is the default one: %v", fam.Warm.Argv)
	}
}
