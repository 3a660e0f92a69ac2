package hostcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// drawsPage puts what a page can draw at random into its title, which
// Chromium writes into the PDF's /Title: Math.random's first draws and a
// crypto.randomUUID.
var drawsPage = []byte(`<!doctype html><html><head><script>
document.title = "draws " + [Math.random(), Math.random()].map(x => x.toFixed(15)).join(" ") + " " + crypto.randomUUID();
</script></head><body><p>renderbox self-test: fresh entropy</p></body></html>`)

var drawsTitle = regexp.MustCompile(`/Title \((draws [^)]*)\)`)

// selfTestEntropy checks, in real sandboxes, that nothing a page draws at
// random repeats from one job to the next: two html-pdf jobs with scripts
// on, cold, then in two sandboxes pre-booted by a pool, then in two
// restored from one checkpoint image. Each prints Math.random's first
// draws and a crypto.randomUUID into its PDF; a mode passes when the two
// jobs' differ (docs/security.md, "What restored sandboxes share").
func selfTestEntropy(ctx context.Context, m *sandbox.Manager) ([]sandbox.Check, error) {
	r, err := render.Lookup("html-pdf")
	if err != nil {
		return nil, err
	}
	var fam sandbox.PoolFamily
	for _, f := range render.PoolFamilies() {
		if f.Name == r.Family() {
			fam = f
		}
	}
	var cs []sandbox.Check
	for _, mode := range []string{sandbox.ModeCold, sandbox.ModePrebooted, sandbox.ModeRestored} {
		var pool *sandbox.Pool
		if mode != sandbox.ModeCold {
			f := fam
			f.Size, f.Restore, f.Images, f.Settle = 1, mode == sandbox.ModeRestored, 1, 0
			if pool, err = m.NewPool(sandbox.PoolConfig{Families: []sandbox.PoolFamily{f}}); err != nil {
				return nil, err
			}
		}
		c, err := entropyIn(ctx, m, r, pool, mode)
		if err != nil {
			return nil, fmt.Errorf("self-test: fresh entropy (%s): %w", mode, err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// entropyIn runs two jobs of drawsPage in sandboxes of mode (from pool,
// or cold) and compares what they drew.
func entropyIn(ctx context.Context, m *sandbox.Manager, r *render.Renderer, pool *sandbox.Pool, mode string) (c sandbox.Check, err error) {
	if pool != nil {
		pctx, cancel := context.WithCancel(ctx)
		pool.Start(pctx)
		defer func() {
			cancel()
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer ccancel()
			err = errors.Join(err, pool.Close(cctx))
		}()
	}
	var draws [2]string
	for i := range draws {
		plan, err := r.Prepare(drawsPage, map[string]any{"javascript": true}, render.LimitRequest{})
		if err != nil {
			return c, err
		}
		plan.Job.Input = bytes.NewReader(drawsPage)
		var res *sandbox.Result
		if pool == nil {
			res, err = m.Run(ctx, plan.Job)
		} else {
			sb, terr := takeWithin(ctx, pool, r.Family(), plan.Job.Limits, mode, 3*time.Minute)
			if terr != nil {
				return c, terr
			}
			res, err = m.RunIn(ctx, sb, plan.Job)
		}
		if err != nil {
			return c, err
		}
		outs, err := r.AcceptOutputs(res.Response.Files)
		if err != nil {
			return c, err
		}
		t := drawsTitle.FindSubmatch(outs[0].Data)
		if t == nil {
			return c, errors.New("the PDF has no title of draws")
		}
		draws[i] = strings.TrimPrefix(string(t[1]), "draws ")
	}
	c.Name = "fresh entropy (" + mode + ")"
	a, b := strings.Fields(draws[0]), strings.Fields(draws[1])
	if len(a) != 3 || len(b) != 3 {
		c.Detail = fmt.Sprintf("the jobs drew %q and %q, want two numbers and a UUID each", draws[0], draws[1])
		return c, nil
	}
	c.Pass = a[0] != b[0] && a[1] != b[1] && a[2] != b[2]
	what := "two jobs"
	if mode == sandbox.ModeRestored {
		what = "two jobs restored from one image"
	}
	c.Detail = fmt.Sprintf("%s drew Math.random %s, %s and %s, %s; crypto.randomUUID %s and %s",
		what, a[0], a[1], b[0], b[1], a[2], b[2])
	if !c.Pass {
		c.Detail = "a value repeats: " + c.Detail
	}
	return c, nil
}

// takeWithin takes a sandbox of mode from the family, waiting for the
// pool to fill it.
func takeWithin(ctx context.Context, p *sandbox.Pool, family string, lim sandbox.Limits, mode string, d time.Duration) (*sandbox.Sandbox, error) {
	deadline := time.Now().Add(d)
	for {
		if p.Idle(family) > 0 {
			sb, got := p.Take(ctx, family, lim)
			if sb != nil && got == mode {
				return sb, nil
			}
			if sb != nil {
				_ = sb.Destroy(context.WithoutCancel(ctx))
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("the pool had no %s sandbox ready within %g s", mode, d.Seconds())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
