//go:build !unit

package render_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

// siteZip packs files into a ZIP in the order of names.
func siteZip(t *testing.T, files map[string][]byte, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(files[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// reportSite is samples.Report with a font from the rootfs.
func reportSite(t *testing.T) (map[string][]byte, []string) {
	t.Helper()
	font, err := os.ReadFile(filepath.Join(rootfs.Dir(testenv.RootfsTree(t)), "usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"))
	if err != nil {
		t.Fatal(err)
	}
	s := samples.Report(font)
	return s.Files, s.Order
}

// pageRaster rasterises a PDF's first page at 96 dpi in a sandbox.
func pageRaster(t *testing.T, m *sandbox.Manager, pdf []byte) image.Image {
	t.Helper()
	out, _ := renderOK(t, m, "pdf-png", pdf, map[string]any{"dpi": 96, "last_page": 1})
	return decode(t, out["page-1.png"])
}

func isBlue(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return b > 0xe000 && r < 0x2000 && g < 0x2000
}

func TestHTMLReportWithItsFilesRenders(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	files, names := reportSite(t)
	opts := map[string]any{"javascript": true, "wait_delay": 1, "margin_mm": 0}
	out, res := renderOK(t, m, "html-pdf", siteZip(t, files, names...), opts)
	pdf := out["output.pdf"]
	if text := pdfText(t, m, pdf); !strings.Contains(text, "Quarterly fidelity report") || !strings.Contains(text, "Chart drawn by script") {
		t.Errorf("pdftotext = %q, want the title and the script's chart", text)
	}
	if fonts := testenv.Tool(t, m, "pdffonts", pdf); !strings.Contains(fonts, "DejaVuSansMono-Bold") {
		t.Errorf("pdffonts = %q, want the web font (DejaVuSansMono-Bold) embedded", fonts)
	}
	img := pageRaster(t, m, pdf)
	if !isRed(img.At(50, 250)) || !isBlue(img.At(350, 250)) || !isWhite(img.At(200, 250)) {
		t.Errorf("pixels (50,250)=%v (350,250)=%v (200,250)=%v, want the PNG's red, the stylesheet's blue bar, white between",
			img.At(50, 250), img.At(350, 250), img.At(200, 250))
	}
	if len(res.Blocked)+len(res.Missing)+len(res.ConsoleErrors) != 0 {
		t.Errorf("a page with all its files reported refused %q, missing %q, console %q", res.Blocked, res.Missing, res.ConsoleErrors)
	}

	// The entry need not be index.html; a missing file is a 404, listed.
	files["report/main.html"] = bytes.ReplaceAll(files["index.html"], []byte(`href="css/`), []byte(`href="../css/`))
	files["report/main.html"] = bytes.ReplaceAll(files["report/main.html"], []byte(`src="img/`), []byte(`src="../img/missing-`))
	out, res = renderOK(t, m, "html-pdf", siteZip(t, files, "report/main.html", "css/report.css", "fonts/report.ttf", "img/red.png"),
		map[string]any{"entry": "report/main.html", "margin_mm": 0})
	if !slices.Contains(res.Missing, "https://document.renderbox.invalid/img/missing-red.png") {
		t.Errorf("missing = %q, want img/missing-red.png", res.Missing)
	}
	img = pageRaster(t, m, out["output.pdf"])
	if !isWhite(img.At(50, 250)) {
		t.Errorf("pixel (50,250)=%v, want white where the missing image is", img.At(50, 250))
	}
	if text := pdfText(t, m, out["output.pdf"]); !strings.Contains(text, "Quarterly fidelity report") {
		t.Errorf("pdftotext = %q, want the title of report/main.html", text)
	}
}

func TestHTMLPageResourceErrors(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	files, names := reportSite(t)
	files["index.html"] = append(files["index.html"], []byte(`<img src="http://127.0.0.1:9/beacon.png"><script>console.error("chart data stale")</script>`)...)
	site := siteZip(t, files, names...)
	_, res := renderOK(t, m, "html-pdf", site, map[string]any{"javascript": true})
	if len(res.Blocked) != 1 || res.Blocked[0] != "http://127.0.0.1:9/beacon.png" {
		t.Errorf("refused = %q, want the beacon", res.Blocked)
	}
	if len(res.ConsoleErrors) != 1 || !strings.Contains(res.ConsoleErrors[0], "chart data stale") {
		t.Errorf("console errors = %q, want the page's console.error", res.ConsoleErrors)
	}
	for opt, says := range map[string]string{"fail_on_resource_error": "http://127.0.0.1:9/beacon.png", "fail_on_console_error": "chart data stale"} {
		err := renderErr(t, m, "html-pdf", site, map[string]any{"javascript": true, opt: true})
		if sandbox.OutcomeOf(err) != sandbox.RenderFailed || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: err = %v (%s), want render_failed naming %q", opt, err, sandbox.OutcomeOf(err), says)
		}
	}
}

// renderErr runs a job that must fail and returns its error.
func renderErr(t *testing.T, m *sandbox.Manager, name string, input []byte, opts map[string]any) error {
	t.Helper()
	_, plan := mustPlan(t, name, input, opts)
	_, err := m.Run(context.Background(), plan.Job)
	if err == nil {
		t.Fatalf("%s %v: succeeded, want a failure", name, opts)
	}
	return err
}

func TestSiteArchivesAreCheckedBeforeAnySandbox(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("html-pdf")
	page := []byte("<p>x</p>")
	for _, tc := range []struct {
		name string
		zip  func() []byte
		opts map[string]any
		want error
		says string
	}{
		{"climbs out", func() []byte { return siteZip(t, map[string][]byte{"../x.html": page}, "../x.html") }, nil, render.ErrInvalidInput, `"../x.html"`},
		{"absolute", func() []byte { return siteZip(t, map[string][]byte{"/etc/x.html": page}, "/etc/x.html") }, nil, render.ErrInvalidInput, "relative"},
		{"no page", func() []byte { return siteZip(t, map[string][]byte{"a.css": page}, "a.css") }, nil, render.ErrInvalidInput, "no index.html"},
		{"entry absent", func() []byte { return siteZip(t, map[string][]byte{"index.html": page}, "index.html") }, map[string]any{"entry": "other.html"}, render.ErrInvalidOptions, "does not hold"},
		{"symlink", func() []byte {
			var b bytes.Buffer
			zw := zip.NewWriter(&b)
			h := &zip.FileHeader{Name: "index.html"}
			h.SetMode(0o777 | os.ModeSymlink)
			w, _ := zw.CreateHeader(h)
			_, _ = w.Write([]byte("/etc/passwd"))
			_ = zw.Close()
			return b.Bytes()
		}, nil, render.ErrInvalidInput, "not a file"},
		{"too many files", func() []byte {
			files := map[string][]byte{}
			var names []string
			for i := 0; i <= render.MaxSiteFiles; i++ {
				n := "f" + strconv.Itoa(i) + ".html"
				files[n], names = page, append(names, n)
			}
			return siteZip(t, files, names...)
		}, nil, render.ErrInputTooLarge, "more than 1000 files"},
		{"entry on a single file", func() []byte { return page }, map[string]any{"entry": "index.html"}, render.ErrInvalidOptions, "one text/html file"},
	} {
		_, err := r.Prepare(tc.zip(), tc.opts, render.LimitRequest{})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
	// The unpacked size is bounded from the directory's claims, too.
	big := siteZip(t, map[string][]byte{"index.html": bytes.Repeat([]byte("x"), 1<<20)}, "index.html")
	if _, err := r.Prepare(big, nil, render.LimitRequest{}); err != nil {
		t.Errorf("a 1 MiB page: %v", err)
	}
}

// A site whose end record states its directory in the size of its first
// entry, index.html, over a directory of 1000 files: the host refuses it,
// and a sandbox sent it anyway (the host's check bypassed) unpacks nothing.
// archive/zip, which reads on past the stated size, unpacked every file
// where the host had judged one.
func TestSiteArchiveIsReadTheHostsWayInTheSandbox(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	r, _ := render.Lookup("html-pdf")
	crowd := samples.Crowd(render.MaxSiteFiles).Zip()
	understated := samples.ZipUnderstated(crowd)
	const says = "end record says its directory is 56 bytes"
	if _, err := r.Prepare(understated, nil, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidInput) || !strings.Contains(err.Error(), says) {
		t.Errorf("the host took the understated archive: %v; want invalid input saying %q", err, says)
	}
	plan, err := r.Prepare(crowd, nil, render.LimitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	plan.Job.Input, plan.Job.Request.InputSize = bytes.NewReader(understated), int64(len(understated))
	_, err = m.Run(context.Background(), plan.Job)
	var e *sandbox.Error
	if !errors.As(err, &e) || e.Outcome != sandbox.RenderFailed || !strings.Contains(e.Msg, "renderbox-unpack: reading the archive's directory: the ZIP's "+says) {
		t.Errorf("the sandbox given the understated archive: %v; want render_failed from the unpacker saying %q", err, says)
	}
}

func TestUnpackerRefusesWhatTheHostWouldHave(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	// The host's checks bypassed: the sandbox's own unpacker refuses a
	// path that climbs out, and one past its byte bound.
	for name, tc := range map[string]struct {
		zip  []byte
		max  int64
		says string
	}{
		"climbs out": {siteZip(t, map[string][]byte{"ok.html": []byte("x"), "../../etc/x": []byte("y")}, "ok.html", "../../etc/x"), 1 << 20, "not an acceptable path"},
		"bomb":       {siteZip(t, map[string][]byte{"index.html": bytes.Repeat([]byte("a"), 4<<20)}, "index.html"), 1 << 20, "over what the archive may unpack"},
	} {
		res, err := m.Run(context.Background(), sandbox.Job{
			Request: wire.Request{
				Mode: wire.ModeRender, InputName: "input.zip", InputSize: int64(len(tc.zip)),
				Unpack: &wire.Unpack{Archive: wire.InputDir + "/input.zip", Dir: wire.InputDir + "/site", MaxFiles: 10, MaxBytes: tc.max},
				Steps:  []wire.Step{{Argv: []string{"/bin/ls", "-R", wire.InputDir + "/site"}}},
				Env:    []string{"PATH=/usr/bin:/bin"},
			},
			Input: bytes.NewReader(tc.zip),
		})
		if sandbox.OutcomeOf(err) != sandbox.RenderFailed || !strings.Contains(res.Response.Result.StderrTail, tc.says) {
			t.Errorf("%s: err = %v, stderr %q; want render_failed saying %q", name, err, res.Response.Result.StderrTail, tc.says)
		}
	}
}

func near(a, b float64) bool { return a > b-1.5 && a < b+1.5 }

func TestChromiumPrintControls(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	var long strings.Builder
	long.WriteString(`<!DOCTYPE html><html><head><title>Controls</title></head><body>`)
	for i := 1; i <= 3; i++ {
		fmt := `<h1>Chapter %d</h1><p style="height:9in">Body of chapter %d.</p>`
		long.WriteString(strings.ReplaceAll(strings.ReplaceAll(fmt, "%d", strconv.Itoa(i)), "\n", ""))
	}
	long.WriteString(`</body></html>`)
	page := []byte(long.String())

	t.Run("paper names in any case, custom sizes and margins per side", func(t *testing.T) {
		out, _ := renderOK(t, m, "html-pdf", page, map[string]any{"paper": "A4"})
		if w, h := pageSize(t, m, out["output.pdf"]); !near(w, 595.2) || !near(h, 841.9) {
			t.Errorf("paper A4: %g x %g pts, want 595 x 842", w, h)
		}
		out, _ = renderOK(t, m, "html-pdf", page, map[string]any{"paper_width": "100mm", "paper_height": "6in", "margin_left": "1in", "margin_top": "0mm"})
		pdf := out["output.pdf"]
		if w, h := pageSize(t, m, pdf); !near(w, 283.5) || !near(h, 432) {
			t.Errorf("100mm x 6in: %g x %g pts, want 283.5 x 432", w, h)
		}
		// The first word starts one inch (72 pt) from the left edge.
		bbox := testenv.Tool(t, m, "pdftotext", pdf, "-bbox", "-f", "1", "-l", "1")
		x := regexp.MustCompile(`xMin="([0-9.]+)"[^>]*>Chapter<`).FindStringSubmatch(bbox)
		if x == nil {
			t.Fatalf("no 'Chapter' in %s", bbox)
		}
		if v, _ := strconv.ParseFloat(x[1], 64); v < 70 || v > 90 {
			t.Errorf("'Chapter' starts at x=%s pt, want about 72 (margin_left 1in plus the body's 8px)", x[1])
		}
	})
	t.Run("header and footer with page numbers", func(t *testing.T) {
		// Three pages, whatever the margins.
		broken := bytes.ReplaceAll(page, []byte(`style="height:9in"`), []byte(`style="break-after:page"`))
		broken = bytes.Replace(broken, []byte(`<p style="break-after:page">Body of chapter 3.`), []byte(`<p>Body of chapter 3.`), 1)
		out, _ := renderOK(t, m, "html-pdf", broken, map[string]any{
			"margin_mm":   20,
			"footer_html": `<div style="font-size:10px;width:100%;text-align:center">Page <span class="pageNumber"></span> of <span class="totalPages"></span></div>`,
			"header_html": `<div style="font-size:10px">Title: <span class="title"></span></div>`,
		})
		text := pdfText(t, m, out["output.pdf"])
		for _, want := range []string{"Page 1 of 3", "Page 3 of 3", "Title: Controls"} {
			if !strings.Contains(text, want) {
				t.Errorf("pdftotext = %q, want %q", text, want)
			}
		}
	})
	t.Run("outline, tagged, single page", func(t *testing.T) {
		out, _ := renderOK(t, m, "html-pdf", page, map[string]any{"generate_outline": true, "tagged": true})
		pdf := out["output.pdf"]
		if info := pdfInfo(t, m, pdf); info["Tagged"] != "yes" {
			t.Errorf("pdfinfo Tagged = %q, want yes", info["Tagged"])
		}
		xml := testenv.Tool(t, m, "pdftohtml", pdf, "-xml", "-stdout", "-i", "-q")
		for i := 1; i <= 3; i++ {
			if !regexp.MustCompile(`<item page="\d+">Chapter ` + strconv.Itoa(i) + `</item>`).MatchString(xml) {
				t.Errorf("the outline has no entry for Chapter %d: %s", i, xml[:min(len(xml), 2000)])
			}
		}
		out, _ = renderOK(t, m, "html-pdf", page, map[string]any{"single_page": true})
		info := pdfInfo(t, m, out["output.pdf"])
		if _, h := pageSize(t, m, out["output.pdf"]); info["Pages"] != "1" || h < 3*9*72 {
			t.Errorf("single_page: %s pages, %g pts tall; want 1 page over 27 in", info["Pages"], h)
		}
		if text := pdfText(t, m, out["output.pdf"]); !strings.Contains(text, "Body of chapter 3.") {
			t.Errorf("single_page lost the end: %q", text)
		}
	})
	t.Run("waits", func(t *testing.T) {
		late := []byte(`<!DOCTYPE html><body><script>setTimeout(() => {
			const d = document.createElement("p"); d.id = "done"; d.textContent = "Drawn late"; document.body.append(d);
			window.ready = true; }, 700)</script></body>`)
		for _, opts := range []map[string]any{
			{"javascript": true, "wait_for_selector": "#done"},
			{"javascript": true, "wait_for_expression": "window.ready === true"},
			{"javascript": true, "wait_delay": 1.5},
		} {
			out, _ := renderOK(t, m, "html-pdf", late, opts)
			if text := pdfText(t, m, out["output.pdf"]); !strings.Contains(text, "Drawn late") {
				t.Errorf("%v: pdftotext = %q, want the late paragraph", opts, text)
			}
		}
		err := renderErr(t, m, "html-pdf", late, map[string]any{"wait_for_selector": "#done", "wait_timeout": 1})
		if sandbox.OutcomeOf(err) != sandbox.RenderFailed || !strings.Contains(err.Error(), "wait_for_selector") {
			t.Errorf("a selector never met: %v (%s), want render_failed naming wait_for_selector", err, sandbox.OutcomeOf(err))
		}
	})
}

func TestChromiumScreenshotControls(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	page := []byte(`<!DOCTYPE html><html><body style="margin:0">
<div id="badge" style="position:absolute;left:100px;top:50px;width:120px;height:40px;background:#f00"></div>
</body></html>`)
	for format, want := range map[string]string{"jpeg": "output.jpg", "webp": "output.webp"} {
		out, _ := renderOK(t, m, "html-png", page, map[string]any{"format": format, "quality": 80, "width": 300, "height": 200})
		if b := decode(t, out[want]).Bounds(); b.Dx() != 300 || b.Dy() != 200 {
			t.Errorf("%s: %v %v, want a 300×200 %s", format, keys(out), b, want)
		}
	}
	out, _ := renderOK(t, m, "html-png", page, map[string]any{"selector": "#badge", "device_scale_factor": 2})
	img := decode(t, out["output.png"])
	if b := img.Bounds(); b.Dx() != 240 || b.Dy() != 80 || !isRed(img.At(120, 40)) {
		t.Errorf("selector capture is %v with (120,40)=%v, want 240×80 of red", b, img.At(120, 40))
	}
	out, _ = renderOK(t, m, "html-png", page, map[string]any{"clip_x": 80, "clip_y": 40, "clip_width": 60, "clip_height": 30})
	img = decode(t, out["output.png"])
	if b := img.Bounds(); b.Dx() != 60 || b.Dy() != 30 || !isWhite(img.At(5, 5)) || !isRed(img.At(40, 20)) {
		t.Errorf("clip is %v with (5,5)=%v (40,20)=%v, want 60×30, white then red", b, img.At(5, 5), img.At(40, 20))
	}
	out, _ = renderOK(t, m, "html-png", []byte(`<p style="margin:0">transparent</p>`), map[string]any{"omit_background": true, "width": 200, "height": 100})
	if _, _, _, a := decode(t, out["output.png"]).At(150, 80).RGBA(); a != 0 {
		t.Errorf("omit_background: alpha at an empty spot is %d, want 0", a)
	}
}

func TestMarkdownWithItsFiles(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	red := samples.Image(40, 40, 0, 0, 40)
	site := samples.Site{
		Files: map[string][]byte{
			"docs/guide.md":  []byte("# Guide\n\n![logo](../img/logo.png)\n\nText under the logo.\n"),
			"img/logo.png":   encodePNG(red),
			"css/theme.css":  []byte("html, body { background: #0000ff; }\n"),
			"notes/other.md": []byte("# Other\n"),
		},
		Order: []string{"docs/guide.md", "img/logo.png", "css/theme.css", "notes/other.md"},
	}
	out, res := renderOK(t, m, "markdown-pdf", site.Zip(), map[string]any{"stylesheet": "css/theme.css", "margin_mm": 0})
	pdf := out["output.pdf"]
	if text := pdfText(t, m, pdf); !strings.Contains(text, "Guide") || !strings.Contains(text, "Text under the logo.") || strings.Contains(text, "Other") {
		t.Errorf("pdftotext = %q, want docs/guide.md (the first Markdown file) and only it", text)
	}
	if imgs := testenv.Tool(t, m, "pdfimages", pdf, "-list"); !strings.Contains(imgs, " 40    40 ") {
		t.Errorf("pdfimages -list = %q, want the 40×40 logo", imgs)
	}
	if img := pageRaster(t, m, pdf); !isBlue(img.At(700, 900)) {
		t.Errorf("pixel (700,900) = %v, want the stylesheet's blue", img.At(700, 900))
	}
	if len(res.Missing)+len(res.Blocked) != 0 {
		t.Errorf("missing %q, refused %q; want none", res.Missing, res.Blocked)
	}
	// The stylesheet must be one of the files.
	r, _ := render.Lookup("markdown-pdf")
	if _, err := r.Prepare(site.Zip(), map[string]any{"stylesheet": "css/none.css"}, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
		t.Errorf("a stylesheet not in the archive: %v, want invalid options", err)
	}
}
