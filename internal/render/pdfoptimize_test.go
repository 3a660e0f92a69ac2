//go:build !unit

package render_test

import (
	"fmt"
	"image"
	"image/color"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

func init() {
	good["pdf-optimize"], wrong["pdf-optimize"] = samples.PDF("optimize me", 1), samples.SVG(2, 2, 0, 0, 1)
}

// photo is a w×h photograph as a camera stores it: smooth light with
// grain, a JPEG at 95%.
func photo(w, h int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			grain := func(v int) uint8 { return uint8(max(0, min(255, v+rng.IntN(25)-12))) }
			img.Set(x, y, color.RGBA{grain(60 + 160*x/w), grain(90 + 120*y/h), grain(200 - 150*x/w), 255})
		}
	}
	return encodeJPEG(img)
}

// A Chromium PDF of two pages with two large photographs comes out of
// pdf-optimize at most half its size, with the same pages, the same
// text, and pages that look the same (each page's pixels, at 40 dpi,
// within a few levels of the original's on average). A PDF with nothing
// to gain comes back no larger.
func TestPDFOptimize(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	files := map[string][]byte{
		"index.html": []byte(`<!doctype html><html><body style="font-family: DejaVu Sans">
<h1>Field report</h1><p>The survey of the northern ridge, with two photographs.</p>
<img src="a.jpg" style="width: 100%"><p>Figure 1: the ridge at dawn.</p>
<div style="break-before: page"><h2>Second day</h2><img src="b.jpg" style="width: 100%"><p>Figure 2: the valley.</p></div>
</body></html>`),
		"a.jpg": photo(2400, 1600, 1),
		"b.jpg": photo(2400, 1600, 2),
	}
	out, _ := renderOK(t, m, "html-pdf", siteZip(t, files, "index.html", "a.jpg", "b.jpg"), nil)
	original := out["output.pdf"]
	if len(original) < 1<<20 {
		t.Fatalf("the Chromium PDF is %d bytes; the test wants a large one", len(original))
	}
	out, _ = renderOK(t, m, "pdf-optimize", original, nil)
	optimized := out["output.pdf"]
	t.Logf("pdf-optimize: %d bytes → %d (%.1f%%)", len(original), len(optimized), 100*float64(len(optimized))/float64(len(original)))
	if len(optimized)*2 > len(original) {
		t.Errorf("optimized to %d bytes from %d: not halved", len(optimized), len(original))
	}
	if a, b := pdfPages(t, m, original), pdfPages(t, m, optimized); a != b || a != 2 {
		t.Errorf("pages: %d before, %d after; want 2 and 2", a, b)
	}
	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if a, b := words(pdfText(t, m, original)), words(pdfText(t, m, optimized)); a != b || !strings.Contains(a, "Figure 2: the valley.") {
		t.Errorf("text before: %q\nafter: %q", a, b)
	}
	before, after := pagesAt(t, m, original, 40), pagesAt(t, m, optimized, 40)
	for i := range before {
		if d := meanDiff(before[i], after[i]); d > 4 {
			t.Errorf("page %d differs by %.2f levels on average after optimizing, want at most 4", i+1, d)
		} else {
			t.Logf("page %d: %.2f levels apart on average", i+1, d)
		}
	}

	// Nothing to gain: a small text PDF comes back no larger.
	small := samples.PDF("already small", 1)
	out, _ = renderOK(t, m, "pdf-optimize", small, nil)
	if len(out["output.pdf"]) > len(small) {
		t.Errorf("a small PDF of %d bytes came back as %d", len(small), len(out["output.pdf"]))
	}
}

// pagesAt renders pdf's pages with pdf-png at dpi.
func pagesAt(t *testing.T, m *sandbox.Manager, pdf []byte, dpi int) []image.Image {
	t.Helper()
	out, _ := renderOK(t, m, "pdf-png", pdf, map[string]any{"dpi": dpi})
	var pages []image.Image
	for i := 1; ; i++ {
		b, ok := out[fmt.Sprintf("page-%d.png", i)]
		if !ok {
			return pages
		}
		pages = append(pages, decode(t, b))
	}
}

// meanDiff is the mean absolute difference of two images' channels, in
// levels of 255; images of different sizes are 255 apart.
func meanDiff(a, b image.Image) float64 {
	if a.Bounds() != b.Bounds() {
		return 255
	}
	var sum, n float64
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			for _, d := range [][2]uint32{{r1, r2}, {g1, g2}, {b1, b2}} {
				sum += abs(float64(d[0]>>8) - float64(d[1]>>8))
				n++
			}
		}
	}
	return sum / n
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
