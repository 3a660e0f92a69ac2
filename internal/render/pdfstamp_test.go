//go:build !unit

package render_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

func init() {
	for _, name := range []string{"pdf-watermark", "pdf-stamp"} {
		good[name], wrong[name] = samples.PDF("a", 1), samples.HTML("a", "b")
		goodOptions[name] = map[string]any{"text": "DRAFT"}
	}
}

// The text is on the pages chosen and on no other, in pdftotext's reading
// of each page, and the document keeps its pages.
func TestPDFStamp(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.PDF("page", 4)
	for _, tc := range []struct {
		name   string
		opts   map[string]any
		marked []bool
	}{
		{"pdf-stamp", map[string]any{"text": "PAID 2026-12-03", "pages": "1,3-4"}, []bool{true, false, true, true}},
		{"pdf-watermark", map[string]any{"text": "PAID 2026-12-03", "rotation": 0, "pages": "2"}, []bool{false, true, false, false}},
		{"pdf-stamp", map[string]any{"text": "Ελληνικά · Кириллица\nPAID 2026-12-03", "font": "serif", "font_size": 10, "position": "bottom-left", "opacity": 0.5}, []bool{true, true, true, true}},
	} {
		out, _ := renderOK(t, m, tc.name, input, tc.opts)
		pages := pageTexts(t, m, out["output.pdf"])
		if len(pages) != 4 {
			t.Errorf("%s %v: %d pages, want 4", tc.name, tc.opts, len(pages))
			continue
		}
		text := tc.opts["text"].(string)
		for i, p := range pages {
			if !strings.Contains(p, fmt.Sprintf("page page %d", i+1)) {
				t.Errorf("%s %v: page %d says %q, want its own text kept", tc.name, tc.opts, i+1, p)
			}
			for _, line := range strings.Split(text, "\n") {
				if strings.Contains(p, line) != tc.marked[i] {
					t.Errorf("%s %v: page %d says %q; marked with %q: %v, want %v", tc.name, tc.opts, i+1, p, line, !tc.marked[i], tc.marked[i])
				}
			}
		}
	}
	e := sandboxErr(t, m, "pdf-stamp", input, map[string]any{"text": "x", "pages": "2-5"})
	if e.Outcome != sandbox.RenderFailed {
		t.Errorf("a page past the end: %s %q, want render_failed", e.Outcome, e.Msg)
	}
}

// {page}, {pages} and {date} in a stamp's text become each page's
// number, the page count and the day: "Page 3 of 4" on the third page,
// numbered as in the document when only some pages are marked.
func TestPDFStampPlaceholders(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.PDF("page", 4)
	out, _ := renderOK(t, m, "pdf-stamp", input, map[string]any{"text": "Page {page} of {pages}\n{date}", "pages": "2-4", "font_size": 12})
	pages := pageTexts(t, m, out["output.pdf"])
	today := time.Now().UTC().Format(time.DateOnly)
	for i, p := range pages {
		want := fmt.Sprintf("Page %d of 4", i+1)
		if strings.Contains(p, want) != (i > 0) || strings.Contains(p, today) != (i > 0) || strings.Contains(p, "{") {
			t.Errorf("page %d says %q; want %q and %s on pages 2-4 only, no placeholder left", i+1, p, want, today)
		}
	}
}

// Several marks in one job, each with its own options and pages, laid
// in their order; bad marks are refused before a sandbox.
func TestPDFStampMarks(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.PDF("page", 3)
	// Upright (a watermark turns 45° by default), so pdftotext reads it.
	marks := `[{"text": "CONFIDENTIAL", "position": "top", "rotation": 0}, {"text": "Page {page} of {pages}", "position": "bottom-right", "font_size": 10, "pages": "2-3", "color": "#000000", "rotation": 0}]`
	for _, name := range []string{"pdf-stamp", "pdf-watermark"} {
		out, _ := renderOK(t, m, name, input, map[string]any{"marks": marks})
		pages := pageTexts(t, m, out["output.pdf"])
		if len(pages) != 3 {
			t.Fatalf("%s: %d pages", name, len(pages))
		}
		for i, p := range pages {
			numbered := strings.Contains(p, fmt.Sprintf("Page %d of 3", i+1))
			if !strings.Contains(p, "CONFIDENTIAL") || numbered != (i > 0) || !strings.Contains(p, fmt.Sprintf("page page %d", i+1)) {
				t.Errorf("%s: page %d says %q; want CONFIDENTIAL, its own text, and a page number on pages 2-3", name, i+1, p)
			}
		}
	}
	r, _ := render.Lookup("pdf-stamp")
	for _, bad := range []map[string]any{
		{"marks": `[]`}, {"marks": `[{"position": "top"}]`}, {"marks": `[{"text": "a", "colour": "red"}]`},
		{"marks": `[{"text": "a", "color": "red"}]`}, {"marks": `{"text": "a"}`}, {"marks": `[{"text": "a"}]`, "text": "b"},
		{"marks": `[{"text": "a"}]`, "pages": "1"},
		{"marks": "[" + strings.Repeat(`{"text": "a"},`, 10) + `{"text": "a"}]`},
	} {
		if _, err := r.Prepare(input, bad, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("%v: %v, want invalid options", bad, err)
		}
	}
}

// A watermark goes under the page's content, a stamp over it: on a page
// an opaque image fills, the watermark leaves the rendered page as it was
// and the stamp changes it.
func TestPDFWatermarkUnderStampOver(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.NoisePDF(1, 61, 79, 7)
	raster := func(pdf []byte) image.Image {
		out, _ := renderOK(t, m, "pdf-png", pdf, map[string]any{"dpi": 36})
		return decode(t, out["page-1.png"])
	}
	before := raster(input)
	opts := map[string]any{"text": "OVER OR UNDER", "font_size": 48, "rotation": 0, "position": "center", "opacity": 1, "color": "#00ff00"}
	for name, changed := range map[string]bool{"pdf-watermark": false, "pdf-stamp": true} {
		out, _ := renderOK(t, m, name, input, opts)
		after := raster(out["output.pdf"])
		if same := samePixels(before, after); same == changed {
			t.Errorf("%s over an opaque page: the rendered page changed: %v, want %v", name, !same, changed)
		}
		// Hidden or not, the text is in the page.
		if text := pdfText(t, m, out["output.pdf"]); !strings.Contains(text, "OVER OR UNDER") {
			t.Errorf("%s: the page says %q", name, text)
		}
	}
}

func samePixels(a, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	for y := a.Bounds().Min.Y; y < a.Bounds().Max.Y; y++ {
		for x := a.Bounds().Min.X; x < a.Bounds().Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				return false
			}
		}
	}
	return true
}

// The text is required and checked before any sandbox: something to
// draw, at most ten lines, no control characters but the newline.
func TestPDFStampOptions(t *testing.T) {
	t.Parallel()
	input := samples.PDF("x", 1)
	for _, name := range []string{"pdf-watermark", "pdf-stamp"} {
		r, _ := render.Lookup(name)
		for _, opts := range []map[string]any{
			nil, {"text": "  \n "}, {"text": strings.Repeat("a\n", 10) + "b"}, {"text": "tab\there"}, {"text": "bell\a"},
			{"text": "x", "color": "red"}, {"text": "x", "opacity": 0}, {"text": "x", "pages": "1-z"}, {"text": "x", "position": "middle"},
		} {
			if _, err := r.Prepare(input, opts, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
				t.Errorf("%s %q: %v, want %v", name, opts, err, render.ErrInvalidOptions)
			}
		}
		plan, err := r.Prepare(input, map[string]any{"text": `"); import os #`}, render.LimitRequest{})
		if err != nil {
			t.Fatal(err)
		}
		// The text reaches the sandbox as data: printf's argument, in
		// JSON, never its format or a program's source.
		st := plan.Job.Request.Steps[0]
		if len(st.Argv) != 3 || st.Argv[1] != "%s" || !bytes.Contains([]byte(st.Argv[2]), []byte(`"text":"\"); import os #"`)) {
			t.Errorf("%s: the first step runs %q", name, st.Argv)
		}
	}
}

// A PNG sent after the PDF is the mark: drawn where it is asked, on the
// pages chosen, and refused before any sandbox unless the parts are a PDF
// and a PNG.
func TestPDFStampImage(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	doc, red := samples.PDF("page", 2), encodePNG(samples.Image(40, 40, 0, 0, 40))
	parts := storedZip(t, zip.Store, [2][]byte{[]byte("doc.pdf"), doc}, [2][]byte{[]byte("mark.png"), red})
	out, _ := renderOK(t, m, "pdf-stamp", parts, map[string]any{"position": "center", "rotation": 0, "image_width_mm": 100, "pages": "2"})
	if got := pageTexts(t, m, out["output.pdf"]); !equal(got, labels("page", 1, 2)) {
		t.Errorf("stamped pages say %q, want the document's", got)
	}
	pngs, _ := renderOK(t, m, "pdf-png", out["output.pdf"], map[string]any{"dpi": 36})
	// US Letter at 36 dpi is 306×396: the centre, and a corner.
	for page, want := range map[string]bool{"page-1.png": false, "page-2.png": true} {
		img := decode(t, pngs[page])
		if c := img.At(153, 198); isRed(c) != want || !isWhite(img.At(5, 5)) {
			t.Errorf("%s: the centre is %v (red: want %v), the corner %v", page, c, want, img.At(5, 5))
		}
	}
	r, _ := render.Lookup("pdf-watermark")
	html := samples.HTML("a", "b")
	for _, tc := range []struct {
		input []byte
		opts  map[string]any
		want  error
	}{
		{parts, map[string]any{"text": "both"}, render.ErrInvalidOptions},
		{storedZip(t, zip.Store, [2][]byte{[]byte("doc.pdf"), doc}, [2][]byte{[]byte("mark.html"), html}), nil, render.ErrUnsupportedInput},
		{storedZip(t, zip.Store, [2][]byte{[]byte("mark.png"), red}, [2][]byte{[]byte("doc.pdf"), doc}), nil, render.ErrUnsupportedInput},
		{storedZip(t, zip.Store, [2][]byte{[]byte("doc.pdf"), doc}, [2][]byte{[]byte("mark.png"), red}, [2][]byte{[]byte("more.png"), red}), nil, render.ErrInputTooLarge},
		{storedZip(t, zip.Store, [2][]byte{[]byte("doc.pdf"), doc}), map[string]any{"text": "x"}, render.ErrInvalidInput},
		{storedZip(t, zip.Store, [2][]byte{[]byte("doc.pdf"), doc}, [2][]byte{[]byte("huge.png"), samples.PNGHeader(10000, 10000)}), nil, render.ErrInputTooLarge},
	} {
		if _, err := r.Prepare(tc.input, tc.opts, render.LimitRequest{}); !errors.Is(err, tc.want) {
			t.Errorf("%v: %v, want %v", tc.opts, err, tc.want)
		}
	}
}

// A PDF sent after the document is the mark: its first page, scaled to
// image_width_mm and placed as asked, on the pages chosen — its text
// where the geometry puts it, read back with pdftotext -bbox.
func TestPDFStampPDF(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	// The mark: a US Letter page (612×792 pt) with "SEAL page 1" at
	// (72, 700), drawn half size in the bottom-right corner, no margin.
	doc, seal := samples.PDF("page", 2), samples.PDF("SEAL", 3)
	parts := storedZip(t, zip.Store, [2][]byte{[]byte("doc.pdf"), doc}, [2][]byte{[]byte("seal.pdf"), seal})
	out, _ := renderOK(t, m, "pdf-stamp", parts, map[string]any{"position": "bottom-right", "margin_mm": 0, "rotation": 0, "image_width_mm": 107.95, "pages": "2"})
	texts := pageTexts(t, m, out["output.pdf"])
	if len(texts) != 2 || texts[0] != "page page 1" || !strings.Contains(texts[1], "page page 2") || !strings.Contains(texts[1], "SEAL page 1") || strings.Contains(texts[1], "SEAL page 2") {
		t.Fatalf("stamped pages say %q, want page 2 alone to carry the mark's first page", texts)
	}
	// Half size in the corner: the mark's (72, 700) lands at (342, 350)
	// from the bottom left, 442 pt from the top; its 24 pt text is 12 pt.
	box := wordBox(t, m, out["output.pdf"], 2, "SEAL")
	if box[0] < 340 || box[0] > 345 || box[3] < 438 || box[3] > 446 || box[3]-box[1] < 9 || box[3]-box[1] > 15 {
		t.Errorf("the mark's word SEAL is at %v (xMin yMin xMax yMax, pt from the top left), want about x 342, yMax 442, 12 pt high", box)
	}
	// Opacity and the first page only: a faint mark is still the text.
	out, _ = renderOK(t, m, "pdf-watermark", parts, map[string]any{"opacity": 0.2, "rotation": 0})
	if texts := pageTexts(t, m, out["output.pdf"]); len(texts) != 2 || !strings.Contains(texts[0], "SEAL page 1") || !strings.Contains(texts[1], "SEAL page 1") {
		t.Errorf("watermarked pages say %q, want every page to carry the mark's first page", texts)
	}
	// At 72 dpi the 60 mm mark (scale 0.278) centred on the page puts its
	// text at x 241-300, y 304-312 from the top: drawn at opacity 0.2,
	// black is no darker than 80% white there, while the document's own
	// black text is black.
	pngs, _ := renderOK(t, m, "pdf-png", out["output.pdf"], map[string]any{"dpi": 72, "first_page": 1, "last_page": 1})
	img := decode(t, pngs["page-1.png"])
	if mark, text := darkest(img, image.Rect(236, 298, 306, 318)), darkest(img, image.Rect(70, 70, 220, 100)); mark < 190 || mark > 250 || text > 80 {
		t.Errorf("the darkest grey of the mark is %d (want 190-250 at opacity 0.2), of the document's text %d (want black)", mark, text)
	}
}

// darkest is the lowest grey level (0-255) of img in r.
func darkest(img image.Image, r image.Rectangle) int {
	low := 255
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			low = min(low, int((cr+cg+cb)/3>>8))
		}
	}
	return low
}

// wordBox returns the box pdftotext -bbox gives the first word on page
// of pdf that equals word: xMin, yMin, xMax, yMax in points from the top
// left.
func wordBox(t *testing.T, m *sandbox.Manager, pdf []byte, page int, word string) [4]float64 {
	t.Helper()
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{Mode: wire.ModeRender, InputName: "in.pdf", InputSize: int64(len(pdf)), Env: []string{"PATH=/usr/bin:/bin"},
			Steps: []wire.Step{{Argv: []string{"/usr/bin/pdftotext", "-bbox", "-f", fmt.Sprint(page), "-l", fmt.Sprint(page), wire.InputDir + "/in.pdf", wire.OutputDir + "/words.html"}}}},
		Input: bytes.NewReader(pdf),
	})
	if err != nil {
		t.Fatalf("pdftotext -bbox: %v", err)
	}
	words := string(res.Response.Files[0].Data)
	re := regexp.MustCompile(`<word xMin="([0-9.]+)" yMin="([0-9.]+)" xMax="([0-9.]+)" yMax="([0-9.]+)">` + regexp.QuoteMeta(word) + `</word>`)
	mm := re.FindStringSubmatch(words)
	if mm == nil {
		t.Fatalf("no word %q on page %d:\n%s", word, page, words)
	}
	var box [4]float64
	for i := range box {
		box[i], _ = strconv.ParseFloat(mm[i+1], 64)
	}
	return box
}
