//go:build !unit

package render_test

// safe-pdf through real sandboxes, stage by stage as the worker runs it,
// its result read back with qpdf and poppler in other sandboxes.

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

// safePDF runs a safe-pdf job as the worker does: each stage in a fresh
// sandbox, the next built by the host from what the last returned. It
// returns the PDF and the stages that ran.
func safePDF(t *testing.T, m *sandbox.Manager, input []byte, opts map[string]any) ([]byte, []string) {
	t.Helper()
	r, plan := mustPlan(t, "safe-pdf", input, opts)
	defer plan.Close()
	stages := plan.Stages()
	res, err := m.Run(context.Background(), plan.Job)
	for i := 0; i < len(stages)-1; i++ {
		if err != nil {
			t.Fatalf("safe-pdf %v: stage %s: %v", opts, stages[i], err)
		}
		t.Logf("safe-pdf %v: stage %s: create %v, start %v, render %v", opts, stages[i], res.Timings.Create, res.Timings.Start, res.Timings.Render)
		next, err2 := plan.Next(i, res.Response.Files)
		if err2 != nil {
			t.Fatalf("safe-pdf %v: after stage %s: %v", opts, stages[i], err2)
		}
		res, err = m.Run(context.Background(), next.Job)
	}
	if err != nil {
		t.Fatalf("safe-pdf %v: stage %s: %v", opts, stages[len(stages)-1], err)
	}
	t.Logf("safe-pdf %v: stage %s: create %v, start %v, render %v", opts, stages[len(stages)-1], res.Timings.Create, res.Timings.Start, res.Timings.Render)
	return accepted(t, r, res.Response.Files)["output.pdf"], stages
}

// activeMarkers are what qpdf --json shows of ActivePDF's active content.
var activeMarkers = []string{"/JavaScript", "/JS", "/OpenAction", "/EmbeddedFiles", "/EmbeddedFile", "/Launch", "/AcroForm", "/Annots", "/Widget"}

func TestSafePDFLeavesActiveContentBehind(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.ActivePDF(2)
	// The checks see what is there: the original carries it all.
	orig := testenv.Tool(t, m, "qpdf", input, "--json")
	for _, k := range activeMarkers {
		if !strings.Contains(orig, `"`+k+`"`) {
			t.Fatalf("the original's qpdf --json lacks %s: the check would prove nothing", k)
		}
	}
	if js := testenv.Tool(t, m, "pdfinfo", input, "-js"); !strings.Contains(js, "app.alert") {
		t.Fatalf("pdfinfo -js of the original shows no script:\n%s", js)
	}
	origSizes := pageSizes(t, m, input)
	for _, opts := range []map[string]any{
		{"ocr": true},
		{"grayscale": true, "dpi": 100},
		{"ocr": true, "jpeg_quality": 60},
	} {
		out, stages := safePDF(t, m, input, opts)
		if want := []string{render.StageRasterize, render.StageRebuild}; !equal(stages, want) {
			t.Errorf("%v: stages %q, want %q", opts, stages, want)
		}
		qj := testenv.Tool(t, m, "qpdf", out, "--json")
		for _, k := range activeMarkers {
			if strings.Contains(qj, `"`+k+`"`) {
				t.Errorf("%v: the output's qpdf --json has %s", opts, k)
			}
		}
		if bytes.Contains(out, []byte(samples.ActivePDFPayload)) || bytes.Contains(out, []byte("calc.exe")) || bytes.Contains(out, []byte("app.alert")) {
			t.Errorf("%v: the output holds bytes of the original's payloads", opts)
		}
		if js := testenv.Tool(t, m, "pdfinfo", out, "-js"); strings.Contains(js, "app.alert") {
			t.Errorf("%v: pdfinfo -js of the output shows a script:\n%s", opts, js)
		}
		if got := pageSizes(t, m, out); !equal(got, origSizes) {
			t.Errorf("%v: pages %q, want the original's %q", opts, got, origSizes)
		}
		text := strings.Join(strings.Fields(pdfText(t, m, out)), " ")
		if opts["ocr"] == true {
			for _, w := range []string{"Quarterly harvest report", "Carrots and potatoes page 1", "Carrots and potatoes page 2"} {
				if !strings.Contains(text, w) {
					t.Errorf("the OCR'd output's text %q lacks %q", text, w)
				}
			}
		} else if text != "" {
			t.Errorf("%v: without ocr the output has text %q; it should be pixels only", opts, text)
		}
	}
}

// pageSizes are pdfinfo's "Page N size" lines, rounded to the point.
func pageSizes(t *testing.T, m *sandbox.Manager, pdf []byte) []string {
	t.Helper()
	var sizes []string
	n := pdfPages(t, m, pdf)
	for _, line := range strings.Split(testenv.Tool(t, m, "pdfinfo", pdf, "-f", "1", "-l", fmt.Sprint(n)), "\n") {
		var page int
		var w, h float64
		if _, err := fmt.Sscanf(line, "Page %d size: %g x %g pts", &page, &w, &h); err == nil {
			sizes = append(sizes, fmt.Sprintf("%d: %.0f×%.0f", page, w, h))
		}
	}
	if len(sizes) != n {
		t.Fatalf("pdfinfo lists %d page sizes of %d pages", len(sizes), n)
	}
	return sizes
}

// An image, an office document and an HTML page: each is drawn and
// rebuilt; office and HTML are converted first, in a sandbox of their own.
func TestSafePDFOfImagesOfficeAndHTML(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	for _, tc := range []struct {
		name   string
		input  []byte
		stages []string
		words  string
	}{
		{"png", encodePNG(samples.Image(400, 300, 0, 0, 100)), []string{render.StageRasterize, render.StageRebuild}, ""},
		{"docx", samples.DOCX("Quarterly harvest report"), []string{render.StageConvert, render.StageRasterize, render.StageRebuild}, "Quarterly harvest report"},
		{"html", samples.HTML("Quarterly harvest report", "Carrots and potatoes"), []string{render.StageConvert, render.StageRasterize, render.StageRebuild}, "Carrots and potatoes"},
	} {
		out, stages := safePDF(t, m, tc.input, map[string]any{"ocr": tc.words != ""})
		if !equal(stages, tc.stages) {
			t.Errorf("%s: stages %q, want %q", tc.name, stages, tc.stages)
		}
		if n := pdfPages(t, m, out); n != 1 {
			t.Errorf("%s: %d pages, want 1", tc.name, n)
		}
		if text := strings.Join(strings.Fields(pdfText(t, m, out)), " "); !strings.Contains(text, tc.words) {
			t.Errorf("%s: the output's text %q lacks %q", tc.name, text, tc.words)
		}
	}
}

// frameFile is a pixel stage's file: a netpbm header and n bytes.
func frameFile(name, header string, n int) wire.File {
	return wire.File{Name: name, Data: append([]byte(header), make([]byte, n)...)}
}

// spooled sends files to the plan's pixel stage's spool as a response
// from its sandbox would, in chunks of 5 bytes (a header split across
// them), and returns the response's list: the names, the bytes spooled.
func spooled(t *testing.T, plan *render.Plan, files []wire.File) []wire.File {
	t.Helper()
	sp := plan.Job.Spool
	if sp == nil {
		t.Fatal("safe-pdf's pixel stage has no spool")
	}
	sp.Start()
	var listed []wire.File
	for _, f := range files {
		w := sp.File(f.Name, int64(len(f.Data)))
		for b := f.Data; len(b) > 0; b = b[min(5, len(b)):] {
			if _, err := w.Write(b[:min(5, len(b))]); err != nil {
				t.Fatal(err)
			}
		}
		listed = append(listed, wire.File{Name: f.Name})
	}
	return listed
}

// What the pixel stage returns is checked on the host before anything of
// it reaches the rebuild: raw frames of the promised type and size only,
// pages 1 to N once each, N and each page within the limits.
func TestSafePDFRefusesMalformedFrames(t *testing.T) {
	t.Parallel()
	_, plan := mustPlan(t, "safe-pdf", samples.PDF("x", 1), map[string]any{"dpi": 100})
	defer plan.Close()
	ok := frameFile("page-1.ppm", "P6\n4 3\n255\n", 36)
	if st, err := plan.Next(0, spooled(t, plan, []wire.File{ok})); err != nil || st.Name != render.StageRebuild {
		t.Fatalf("a good frame: %v, %v", st.Name, err)
	}
	var tooMany []wire.File
	for i := range plan.Limits.MaxPages + 1 {
		tooMany = append(tooMany, frameFile(fmt.Sprintf("page-%03d.ppm", i+1), "P6\n4 3\n255\n", 36))
	}
	for _, tc := range []struct {
		name  string
		files []wire.File
		msg   string
	}{
		{"a byte short", []wire.File{frameFile("page-1.ppm", "P6\n4 3\n255\n", 35)}, "holds 35"},
		{"a byte over", []wire.File{frameFile("page-1.ppm", "P6\n4 3\n255\n", 37)}, "holds 37"},
		{"gray bytes for an RGB page", []wire.File{frameFile("page-1.pgm", "P5\n4 3\n255\n", 12)}, "page-N.ppm only"},
		{"a PNG instead of pixels", []wire.File{{Name: "page-1.ppm", Data: encodePNG(samples.Image(4, 3, 0, 0, 1))}}, `does not begin "P6\n"`},
		{"a comment in the header", []wire.File{frameFile("page-1.ppm", "P6\n# x\n4 3\n255\n", 36)}, "not a number"},
		{"16-bit samples", []wire.File{frameFile("page-1.ppm", "P6\n4 3\n65535\n", 72)}, "maxval"},
		{"a page too large", []wire.File{frameFile("page-1.ppm", "P6\n9000 9000\n255\n", 0)}, "over the limit"},
		{"a side too long", []wire.File{frameFile("page-1.ppm", "P6\n10001 1\n255\n", 30003)}, "over the limit"},
		{"too many pages", tooMany, "more pages than max_pages, 100"},
		{"a page missing", []wire.File{ok, frameFile("page-3.ppm", "P6\n4 3\n255\n", 36)}, "numbered 1 to 2"},
		{"a page twice", []wire.File{ok, frameFile("page-01.ppm", "P6\n4 3\n255\n", 36)}, "numbered 1 to 2"},
		{"another file", []wire.File{ok, {Name: "input.pdf", Data: samples.PDF("x", 1)}}, `"input.pdf"`},
		{"nothing", nil, "no page"},
	} {
		_, err := plan.Next(0, spooled(t, plan, tc.files))
		if !errors.Is(err, render.ErrBadOutput) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, render.ErrBadOutput, tc.msg)
		}
	}
	// Grayscale promises P5 frames, one byte a pixel.
	_, gray := mustPlan(t, "safe-pdf", samples.PDF("x", 1), map[string]any{"grayscale": true})
	defer gray.Close()
	if _, err := gray.Next(0, spooled(t, gray, []wire.File{ok})); !errors.Is(err, render.ErrBadOutput) {
		t.Errorf("an RGB frame for a grayscale job: %v, want %v", err, render.ErrBadOutput)
	}
	if _, err := gray.Next(0, spooled(t, gray, []wire.File{frameFile("page-1.pgm", "P5\n4 3\n255\n", 12)})); err != nil {
		t.Errorf("a gray frame for a grayscale job: %v", err)
	}
}

// The rebuild's input is a ZIP of stored entries, each frame behind the
// host's own header, with the page lists, read from a file that no path
// names: made 0600 in a private directory of the temporary directory and
// unlinked at once, so nothing is left there, and closed with the plan.
func TestSafePDFFramesSpillToAnUnlinkedFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, plan := mustPlan(t, "safe-pdf", samples.PDF("x", 2), map[string]any{"dpi": 100})
	defer plan.Close()
	pixels := func(n int) []byte { return bytes.Repeat([]byte{7, 8, 9}, n) }
	files := []wire.File{
		{Name: "page-2.ppm", Data: append([]byte("P6\n4 3\n255\n"), pixels(12)...)},
		{Name: "page-1.ppm", Data: append([]byte("P6\n2 1\n255\n"), pixels(2)...)},
	}
	st, err := plan.Next(0, spooled(t, plan, files))
	if err != nil {
		t.Fatal(err)
	}
	f, ok := st.Input.(*os.File)
	if !ok {
		t.Fatalf("the rebuild's input is a %T, not a file of the host's", st.Input)
	}
	if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Nlink != 0 {
		t.Errorf("the spill file: %v, %v; want mode 0600 and no link", fi.Mode(), err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
	zr, err := zip.NewReader(st.Input, st.Job.Request.InputSize)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"page-0001.ppm": "P6\n2 1\n255\n" + string(pixels(2)),
		"page-0002.ppm": "P6\n4 3\n255\n" + string(pixels(12)),
		"pages.txt":     "/tmp/in/site/page-0001.ppm\n/tmp/in/site/page-0002.ppm\n",
		"jpeg.txt":      "/tmp/work/page-0001.jpg\n/tmp/work/page-0002.jpg\n",
	}
	for _, e := range zr.File {
		rc, err := e.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if err != nil || string(b) != want[e.Name] || e.Method != zip.Store {
			t.Errorf("%s: %q (method %d, %v), want %q stored", e.Name, b, e.Method, err, want[e.Name])
		}
		delete(want, e.Name)
	}
	if len(want) != 0 {
		t.Errorf("the ZIP lacks %v", want)
	}
	plan.Close()
	if _, err := st.Input.ReadAt(make([]byte, 1), 0); err == nil {
		t.Error("the spill file is still open after the plan's Close")
	}
}

// The pixel stage refuses, before drawing, a document of more pages than
// max_pages and a page that would be over max_pixels at the job's dpi,
// saying which: render_failed, not a sandbox out of memory or output.
func TestSafePDFRefusesTooManyOrTooLargePages(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	for _, tc := range []struct {
		name  string
		input []byte
		opts  map[string]any
		msg   string
	}{
		{"3000 pages", samples.PDF("many", 3000), nil, "the document has 3000 pages, more pages than max_pages, 100"},
		{"a 200-inch page", samples.PDFPage(14400, 14400), nil, "page 1 is 14400 × 14400 pt: at 150 dpi that is 30000 × 30000 pixels"},
		{"A0 at 300 dpi", samples.PDFPage(2384, 3370), map[string]any{"dpi": 300}, "over the limit of 35000000 pixels"},
	} {
		e := sandboxErr(t, m, "safe-pdf", tc.input, tc.opts)
		if e.Outcome != sandbox.RenderFailed || !strings.Contains(e.Msg+e.Stderr, tc.msg) {
			t.Errorf("%s: %s %q %q, want render_failed saying %q", tc.name, e.Outcome, e.Msg, e.Stderr, tc.msg)
		}
	}
}

// With jpeg_quality the pages are JPEG (DCT) in the PDF: a page of noise,
// which Flate cannot shrink, comes out far smaller.
func TestSafePDFCompressesAsJPEG(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.NoisePDF(1, 850, 1100, 7)
	lossless, _ := safePDF(t, m, input, map[string]any{"dpi": 100})
	jpeg, _ := safePDF(t, m, input, map[string]any{"dpi": 100, "jpeg_quality": 40})
	if qj := testenv.Tool(t, m, "qpdf", jpeg, "--json"); !strings.Contains(qj, `"/DCTDecode"`) {
		t.Errorf("with jpeg_quality the page is not DCT-encoded")
	}
	if qj := testenv.Tool(t, m, "qpdf", lossless, "--json"); strings.Contains(qj, `"/DCTDecode"`) {
		t.Errorf("without jpeg_quality the page is DCT-encoded")
	}
	t.Logf("a page of noise at 100 dpi: %d bytes lossless, %d bytes as JPEG of quality 40", len(lossless), len(jpeg))
	if len(jpeg)*2 > len(lossless) {
		t.Errorf("JPEG %d bytes, lossless %d: want less than half", len(jpeg), len(lossless))
	}
	if got, want := pageSizes(t, m, jpeg), pageSizes(t, m, input); !equal(got, want) {
		t.Errorf("pages %q, want %q", got, want)
	}
}

// The convert stage runs under its renderer's limits, lowered to the
// job's where the request lowered those further.
func TestSafePDFConvertStageLimits(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("safe-pdf")
	office, _ := render.Lookup("office-pdf")
	for _, tc := range []struct {
		limits  render.LimitRequest
		timeout time.Duration
		memory  int64
	}{
		{render.LimitRequest{}, office.Limits.Timeout, office.Limits.MemoryBytes},
		{render.LimitRequest{TimeoutSeconds: 5, MemoryBytes: 256 << 20}, 5 * time.Second, 256 << 20},
	} {
		plan, err := r.Prepare(samples.DOCX("x"), nil, tc.limits)
		if err != nil {
			t.Fatal(err)
		}
		if l := plan.Job.Limits; l.Timeout != tc.timeout || l.MemoryBytes != tc.memory || plan.FirstFamily() != render.FamilyOffice {
			t.Errorf("%+v: the convert stage runs %v, %d bytes in family %s; want %v, %d in office", tc.limits, l.Timeout, l.MemoryBytes, plan.FirstFamily(), tc.timeout, tc.memory)
		}
	}
}
