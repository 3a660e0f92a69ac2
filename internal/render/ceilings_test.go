package render_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
)

// keepCatalogue puts back, when the test ends, the limits of the named
// renderers that SetCeilings changes. (Top-level parallel tests start
// only once the sequential ones ended: none sees the change.)
func keepCatalogue(t *testing.T, names ...string) {
	type saved struct {
		r      *render.Renderer
		copyOf render.Renderer
	}
	var all []saved
	for _, n := range names {
		r, err := render.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, saved{r, *r})
	}
	t.Cleanup(func() {
		for _, s := range all {
			s.r.Limits, s.r.MaxInputBytes, s.r.MaxPages = s.copyOf.Limits, s.copyOf.MaxInputBytes, s.copyOf.MaxPages
		}
	})
}

// Ceilings read as the operator writes them, and what is not a ceiling
// or past a hard bound is refused, naming the renderer and the bound,
// with nothing changed.
func TestCeilingsParseAndBounds(t *testing.T) {
	cs, err := render.ParseCeilings(" html-pdf:timeout=5m,memory=3G ; pdf-png:pages=500,output=512M,input=80M")
	if err != nil || len(cs) != 2 {
		t.Fatalf("ParseCeilings: %+v, %v", cs, err)
	}
	if c := cs[0]; c.Renderer != "html-pdf" || c.Timeout != 5*time.Minute || c.MemoryBytes != 3<<30 {
		t.Errorf("html-pdf: %+v", c)
	}
	if c := cs[1]; c.Renderer != "pdf-png" || c.Pages != 500 || c.OutputBytes != 512<<20 || c.InputBytes != 80<<20 {
		t.Errorf("pdf-png: %+v", c)
	}
	for in, want := range map[string]string{
		"html-pdf":                               "not renderer:key=value",
		"html-pdf:speed=2":                       "unknown key",
		"html-pdf:timeout=1m,timeout=2m":         "each key once",
		"html-pdf:timeout=1m;html-pdf:memory=3G": "named twice",
		"html-pdf:timeout=soon":                  "timeout",
		"nope-pdf:timeout=1m":                    `no renderer "nope-pdf"`,
		"html-pdf:timeout=31m":                   "outside 1s to 30m0s",
		"html-pdf:memory=32G":                    "outside 128 MiB to 16 GiB",
		"html-pdf:memory=256M":                   "beside its 512 MiB /tmp",
		"office-pdf:input=1G":                    "over 512 MiB",
		"html-pdf:pages=10":                      "counts no pages",
		"pdf-png:pages=20000":                    "outside 1 to 10000",
		"safe-pdf:timeout=5m":                    "stages",
	} {
		err := render.ApplyCeilings(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-ceilings %q: %v, want an error saying %q", in, err, want)
		}
	}
	if r, _ := render.Lookup("html-pdf"); r.Limits.Timeout != time.Minute {
		t.Errorf("refused ceilings changed html-pdf's timeout to %s", r.Limits.Timeout)
	}
}

// A raised timeout is html-pdf's limit: a wait that did not fit the
// catalogue's 60 s fits it, and a lower one is refused again once put
// back; pdf-png renders its raised page count.
func TestCeilingsSetTheCatalogue(t *testing.T) {
	keepCatalogue(t, "html-pdf", "pdf-png")
	html := samples.HTML("long", "A page that waits.")
	r, _ := render.Lookup("html-pdf")
	wait := map[string]any{"wait_delay": 180}
	if _, err := r.Prepare(html, wait, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
		t.Fatalf("wait_delay 180 with a 60 s timeout: %v, want invalid options", err)
	}
	if err := render.ApplyCeilings("html-pdf:timeout=4m,memory=3G;pdf-png:pages=500"); err != nil {
		t.Fatal(err)
	}
	if r.Limits.Timeout != 4*time.Minute || r.Limits.MemoryBytes != 3<<30 {
		t.Errorf("html-pdf's limits after the ceiling: %+v", r.Limits)
	}
	p, err := r.Prepare(html, wait, render.LimitRequest{})
	if err != nil || p.Limits.Timeout != 4*time.Minute {
		t.Fatalf("wait_delay 180 with a 4 m timeout: %v", err)
	}
	if _, err := r.Prepare(html, wait, render.LimitRequest{TimeoutSeconds: 120}); !errors.Is(err, render.ErrInvalidOptions) {
		t.Errorf("wait_delay 180 with the job's timeout lowered to 120 s: %v, want invalid options", err)
	}
	png, _ := render.Lookup("pdf-png")
	if png.MaxPages != 500 || png.Limits.MaxOutputFiles < 500 {
		t.Errorf("pdf-png after pages=500: %d pages, %d output files", png.MaxPages, png.Limits.MaxOutputFiles)
	}
}
