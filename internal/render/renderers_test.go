//go:build !unit

package render_test

// Every renderer, through a real sandbox, with its result checked: PDFs
// parse with the right page count, size and text; images decode to the
// right size and show the right pixels.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

func TestHTMLToPDF(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	page := samples.HTML("Quarterly report", "Rendered inside gVisor by renderbox. 漢字 テスト")
	out, _ := renderOK(t, m, "html-pdf", page, map[string]any{"paper": "a4", "landscape": true})
	pdf := out["output.pdf"]
	info := pdfInfo(t, m, pdf)
	if info["Pages"] != "1" || !strings.Contains(info["Page size"], "841") || !strings.Contains(info["Page size"], "x 595") {
		t.Errorf("pdfinfo: pages %q, size %q; want 1 page, A4 landscape (841.92 x 595.2 pts)", info["Pages"], info["Page size"])
	}
	text := pdfText(t, m, pdf)
	for _, want := range []string{"Quarterly report", "Rendered inside gVisor by renderbox.", "漢字"} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext of the output = %q, want it to contain %q", text, want)
		}
	}
}

func TestHTMLPageReadsOnlyItsOwnInput(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	canary := testenv.Canary(t, "127.0.0.1:0")
	page := []byte(fmt.Sprintf(`<!DOCTYPE html><html><body>
<p>visible text</p>
<iframe src="file:///etc/passwd"></iframe>
<img src="file:///etc/hostname"><img src="http://%[1]s/img">
<link rel="stylesheet" href="https://example.com/x.css">
<script>fetch("http://%[1]s/fetch").catch(()=>{}); var x = new XMLHttpRequest();
try { x.open("GET", "file:///etc/passwd", false); x.send(); document.body.append(x.responseText) } catch (e) {}</script>
</body></html>`, canary.Addr()))
	out, res := renderOK(t, m, "html-pdf", page, map[string]any{"javascript": true})
	text := pdfText(t, m, out["output.pdf"])
	if !strings.Contains(text, "visible text") {
		t.Errorf("the page's own text is missing: %q", text)
	}
	if strings.Contains(text, "root:") {
		t.Errorf("the PDF shows /etc/passwd: %q", text)
	}
	if canary.Hits() != 0 {
		t.Errorf("the host canary got %d connections", canary.Hits())
	}
	blocked := strings.Join(res.Blocked, " ")
	for _, want := range []string{canary.Addr() + "/img", "https://example.com/x.css"} {
		if !strings.Contains(blocked, want) {
			t.Errorf("blocked requests %v do not include %s", res.Blocked, want)
		}
	}
}

// A worker the page starts is attached and intercepted before it runs: its
// request is refused by the agent and listed, not merely lost in the empty
// network namespace.
func TestHTMLWorkersAreIntercepted(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	canary := testenv.Canary(t, "127.0.0.1:0")
	// The worker starts from the head; a long table keeps the parser (not
	// a script) busy meanwhile, so the worker's target is reported before
	// the page has loaded.
	page := []byte(fmt.Sprintf(`<!DOCTYPE html><html><head><script>
new Worker("data:text/javascript,fetch('http://%[1]s/from-worker').catch(()=>{})");
</script></head><body><p>worker page</p><table>%[2]s</table></body></html>`,
		canary.Addr(), strings.Repeat("<tr><td>cell</td><td>cell</td></tr>", 3000)))
	// The worker runs on after the page is printed; on a busy host its
	// request may come too late to be listed, so up to three tries. A
	// request that escaped the interception would never be listed: no try
	// could pass.
	for try := 1; ; try++ {
		_, res := renderOK(t, m, "html-pdf", page, map[string]any{"javascript": true})
		if canary.Hits() != 0 {
			t.Fatalf("the host canary got %d connections", canary.Hits())
		}
		if !strings.Contains(res.StderrTail, "intercepting a worker target") {
			t.Fatalf("the worker was not attached and intercepted; agent's log:\n%s", res.StderrTail)
		}
		if strings.Contains(strings.Join(res.Blocked, " "), canary.Addr()+"/from-worker") {
			break
		}
		if try == 3 {
			t.Fatalf("blocked requests %v do not include the worker's", res.Blocked)
		}
	}
}

// JavaScript is off unless the job asks for it.
func TestHTMLJavaScriptIsOffByDefault(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	page := []byte(`<!DOCTYPE html><html><body><p>static</p><script>document.body.append("SCRIPT RAN")</script></body></html>`)
	for _, tc := range []struct {
		opts map[string]any
		ran  bool
	}{{nil, false}, {map[string]any{"javascript": true}, true}} {
		out, _ := renderOK(t, m, "html-pdf", page, tc.opts)
		text := pdfText(t, m, out["output.pdf"])
		if !strings.Contains(text, "static") || strings.Contains(text, "SCRIPT RAN") != tc.ran {
			t.Errorf("options %v: text %q, want the script to have run: %v", tc.opts, text, tc.ran)
		}
	}
}

func TestHTMLToPNG(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	page := []byte(`<!DOCTYPE html><html><body style="margin:0;background:#fff">
<div style="position:absolute;left:40px;top:30px;width:50px;height:50px;background:#f00"></div>
<div style="height:2000px"></div></body></html>`)
	out, _ := renderOK(t, m, "html-png", page, map[string]any{"width": 400, "height": 300, "device_scale_factor": 2})
	img := decode(t, out["output.png"])
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() != 600 {
		t.Fatalf("screenshot is %dx%d, want 800x600 (400x300 at scale 2)", b.Dx(), b.Dy())
	}
	if !isRed(img.At(130, 110)) || !isWhite(img.At(300, 300)) {
		t.Errorf("pixels (130,110)=%v (300,300)=%v, want red then white", img.At(130, 110), img.At(300, 300))
	}
	// Emoji and CJK glyphs come from the rootfs's fonts, not tofu boxes:
	// the emoji is drawn in colour.
	emoji := []byte(`<!DOCTYPE html><html><body style="margin:0;background:#fff;font-size:120px">😀 漢</body></html>`)
	eo, _ := renderOK(t, m, "html-png", emoji, map[string]any{"width": 400, "height": 200})
	if n := colourful(decode(t, eo["output.png"])); n < 500 {
		t.Errorf("the emoji drew %d colourful pixels, want a colour glyph", n)
	}
	full, _ := renderOK(t, m, "html-png", page, map[string]any{"width": 400, "height": 300, "full_page": true})
	if b := decode(t, full["output.png"]).Bounds(); b.Dx() != 400 || b.Dy() < 2000 {
		t.Errorf("full-page screenshot is %dx%d, want 400 wide and at least 2000 tall", b.Dx(), b.Dy())
	}
}

func TestMarkdownToHTML(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	out, _ := renderOK(t, m, "markdown-html", samples.Markdown("Release notes"), map[string]any{"smart": true})
	html := string(out["output.html"])
	for _, want := range []string{"<!DOCTYPE html>", "<h1>Release notes</h1>", "<table>", "<td>pdf-png</td>", "<del>strikethrough</del>", `type="checkbox"`} {
		if !strings.Contains(html, want) {
			t.Errorf("output.html lacks %q", want)
		}
	}
	if strings.Contains(html, "<script>") {
		t.Errorf("raw <script> passed through to the HTML:\n%s", html)
	}
}

func TestMarkdownToPDF(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	out, _ := renderOK(t, m, "markdown-pdf", samples.Markdown("Release notes"), map[string]any{"paper": "a5"})
	text := pdfText(t, m, out["output.pdf"])
	for _, want := range []string{"Release notes", "pdf-png", "dot-svg", "strikethrough"} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext = %q, want %q in it", text, want)
		}
	}
	if info := pdfInfo(t, m, out["output.pdf"]); !strings.Contains(info["Page size"], "(A5)") {
		t.Errorf("page size %q, want A5", info["Page size"])
	}
}

// A Markdown PDF's title (pdfinfo's Title, read in the real rootfs) is the
// title option, else the document's first heading as text, else the
// outputs' name without its extension — never the page's URL, which it
// was (document.renderbox.invalid).
func TestMarkdownPDFTitle(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	r, err := render.Lookup("markdown-pdf")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, doc, options, outputName, want string
	}{
		{"first heading", "Some words first.\n\n# Quarterly report\n\n## Figures\n\ntext\n", "", "", "Quarterly report"},
		{"heading with markup", "Setext *heading* & `code` <b>raw</b>\n===\n\n# Later\n", "", "", "Setext heading & code raw"},
		{"no heading: output_name", "Just a paragraph.\n", "", "invoice-2026", "invoice-2026"},
		{"no heading: output", "Just a paragraph.\n\n---\n", "", "", "output"},
		{"title option", "# Heading\n", `{"title":"Annual <report> & \"plans\"\u0007 2026"}`, "report", `Annual <report> & "plans" 2026`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := r.PrepareNamed([]byte(tc.doc), "text/markdown", json.RawMessage(tc.options), nil, tc.outputName)
			if err != nil {
				t.Fatal(err)
			}
			plan.Job.Input = strings.NewReader(tc.doc)
			res, err := m.Run(context.Background(), plan.Job)
			if err != nil {
				t.Fatal(err)
			}
			out := accepted(t, r, res.Response.Files)
			if got := pdfInfo(t, m, out["output.pdf"])["Title"]; got != tc.want {
				t.Errorf("Title %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPDFToPNG(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	pages := 3
	out, _ := renderOK(t, m, "pdf-png", samples.PDF("renderbox", pages), nil)
	if len(out) != pages {
		t.Fatalf("got outputs %v, want page-1.png … page-%d.png", keys(out), pages)
	}
	for i := 1; i <= pages; i++ {
		b, ok := out[fmt.Sprintf("page-%d.png", i)]
		if !ok {
			t.Fatalf("no page-%d.png in %v", i, keys(out))
		}
		img := decode(t, b)
		// US Letter at 150 dpi.
		if bd := img.Bounds(); bd.Dx() != 1275 || bd.Dy() != 1650 {
			t.Errorf("page %d is %dx%d, want 1275x1650", i, bd.Dx(), bd.Dy())
		}
		// The text sits 1 inch from the left, 92 pt from the top.
		if n := dark(img, image.Rect(150, 170, 500, 200)); n < 200 {
			t.Errorf("page %d: %d dark pixels where the text should be, want some", i, n)
		}
	}
}

func TestPDFToJPEGPageRangeAndMaxPages(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	pdf := samples.PDF("renderbox", 6)
	out, _ := renderOK(t, m, "pdf-png", pdf, map[string]any{"format": "jpeg", "dpi": 72, "first_page": 2, "last_page": 3})
	if len(out) != 2 || out["page-2.jpg"] == nil || out["page-3.jpg"] == nil {
		t.Fatalf("outputs %v, want page-2.jpg and page-3.jpg", keys(out))
	}
	if b := decode(t, out["page-2.jpg"]).Bounds(); b.Dx() != 612 || b.Dy() != 792 {
		t.Errorf("page-2.jpg is %dx%d, want 612x792 at 72 dpi", b.Dx(), b.Dy())
	}
}

func TestSVGToPNG(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	out, _ := renderOK(t, m, "svg-png", samples.SVG(200, 100, 120, 20, 40), nil)
	img := decode(t, out["output.png"])
	if b := img.Bounds(); b.Dx() != 200 || b.Dy() != 100 {
		t.Fatalf("PNG is %dx%d, want 200x100", b.Dx(), b.Dy())
	}
	for _, p := range []image.Point{{121, 21}, {140, 40}, {158, 58}} {
		if c := img.At(p.X, p.Y); !isRed(c) {
			t.Errorf("pixel %v = %v, want red", p, c)
		}
	}
	for _, p := range []image.Point{{5, 5}, {100, 50}, {165, 65}, {195, 95}} {
		if c := img.At(p.X, p.Y); !isWhite(c) {
			t.Errorf("pixel %v = %v, want white", p, c)
		}
	}
	big, _ := renderOK(t, m, "svg-png", samples.SVG(200, 100, 120, 20, 40), map[string]any{"width": 400})
	img = decode(t, big["output.png"])
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 200 || !isRed(img.At(280, 80)) {
		t.Errorf("width=400: %dx%d, pixel (280,80)=%v; want 400x200 and red", b.Dx(), b.Dy(), img.At(280, 80))
	}
}

func TestSVGToPDF(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	out, _ := renderOK(t, m, "svg-pdf", samples.SVG(200, 100, 120, 20, 40), nil)
	info := pdfInfo(t, m, out["output.pdf"])
	// 200×100 CSS px at 96 dpi is 150×75 pt.
	if info["Pages"] != "1" || !strings.HasPrefix(info["Page size"], "150 x 75") {
		t.Errorf("pdfinfo: pages %q, size %q; want 1 page of 150 x 75 pts", info["Pages"], info["Page size"])
	}
}

func TestDOTToSVGAndPNG(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	dot := samples.DOT("intake", "sandbox", "outputs")
	for _, layout := range []string{"dot", "neato"} {
		out, _ := renderOK(t, m, "dot-svg", dot, map[string]any{"layout": layout})
		svg := string(out["output.svg"])
		for _, want := range []string{"<svg", ">intake<", ">sandbox<", ">outputs<"} {
			if !strings.Contains(svg, want) {
				t.Errorf("layout %s: output.svg lacks %q", layout, want)
			}
		}
	}
	out, _ := renderOK(t, m, "dot-png", dot, map[string]any{"dpi": 192})
	lo, _ := renderOK(t, m, "dot-png", dot, map[string]any{"dpi": 96})
	hi, low := decode(t, out["output.png"]).Bounds(), decode(t, lo["output.png"]).Bounds()
	if hi.Dx() < 2*low.Dx()-4 || hi.Dx() > 2*low.Dx()+4 {
		t.Errorf("dpi 192 gives %d px wide, dpi 96 %d; want twice", hi.Dx(), low.Dx())
	}
}

// Graphviz copies URL attributes into the SVG as written; only http(s),
// mailto and fragment links survive.
func TestDOTSVGDropsUnsafeLinks(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	dot := []byte(`digraph g {
  a [URL="javascript:alert(document.domain)"];
  b [href="  JaVaScRiPt:alert(1)"];
  c [URL="data:text/html,<script>alert(1)</script>"];
  d [URL="https://example.com/ok"];
  a -> b -> c -> d;
}`)
	out, _ := renderOK(t, m, "dot-svg", dot, nil)
	svg := strings.ToLower(string(out["output.svg"]))
	for _, bad := range []string{"javascript:", "data:text"} {
		if strings.Contains(svg, bad) {
			t.Errorf("output.svg still links %q:\n%s", bad, svg)
		}
	}
	if !strings.Contains(svg, `xlink:href="https://example.com/ok"`) {
		t.Errorf("output.svg lost the https link:\n%s", svg)
	}
}

func TestImageThumbnail(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	src := samples.Image(800, 400, 0, 0, 400) // left half red
	out, _ := renderOK(t, m, "image-thumbnail", encodePNG(src), map[string]any{"width": 200, "height": 200})
	img := decode(t, out["thumbnail.png"])
	if b := img.Bounds(); b.Dx() != 200 || b.Dy() != 100 {
		t.Fatalf("thumbnail is %dx%d, want 200x100 (fits 200x200, keeps 2:1)", b.Dx(), b.Dy())
	}
	if !isRed(img.At(50, 50)) || !isWhite(img.At(150, 50)) {
		t.Errorf("pixels (50,50)=%v (150,50)=%v, want red then white", img.At(50, 50), img.At(150, 50))
	}
	jpg := samples.WithEXIF(encodeJPEG(src), "SECRET-GPS-LOCATION")
	for _, format := range []string{"jpeg", "webp"} {
		out, _ := renderOK(t, m, "image-thumbnail", jpg, map[string]any{"width": 100, "height": 100, "format": format})
		name := map[string]string{"jpeg": "thumbnail.jpg", "webp": "thumbnail.webp"}[format]
		b := out[name]
		if img := decode(t, b); img.Bounds().Dx() != 100 || img.Bounds().Dy() != 50 {
			t.Errorf("%s thumbnail is %v, want 100x50", format, img.Bounds())
		}
		if bytes.Contains(b, []byte("SECRET-GPS-LOCATION")) {
			t.Errorf("%s thumbnail keeps the input's EXIF metadata", format)
		}
		// libvips' WebP writer adds a minimal EXIF of its own (resolution);
		// JPEG must carry none at all.
		if format == "jpeg" && bytes.Contains(b, []byte("Exif")) {
			t.Errorf("jpeg thumbnail carries an EXIF segment")
		}
	}
}

func TestOfficeToPDF(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	for name, doc := range map[string][]byte{
		"docx": samples.DOCX("Invoice 2026-117", "Total due: 42 EUR"),
		"odt":  samples.ODT("Invoice 2026-117", "Total due: 42 EUR"),
		"xlsx": samples.XLSX("Invoice 2026-117", "Total due: 42 EUR"),
		"rtf":  samples.RTF("Invoice 2026-117 Total due: 42 EUR"),
	} {
		out, _ := renderOK(t, m, "office-pdf", doc, nil)
		pdf, ok := out["output.pdf"]
		if !ok {
			t.Errorf("%s: outputs %v, want output.pdf", name, keys(out))
			continue
		}
		text := pdfText(t, m, pdf)
		for _, want := range []string{"Invoice 2026-117", "Total due: 42 EUR"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: pdftotext = %q, want %q in it", name, text, want)
			}
		}
	}
}

func dark(img image.Image, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if v, _, _, _ := img.At(x, y).RGBA(); v < 0x4000 {
				n++
			}
		}
	}
	return n
}

// colourful counts saturated pixels (neither grey nor white).
func colourful(img image.Image) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			hi, lo := max(r, g, bl), min(r, g, bl)
			if hi-lo > 0x6000 {
				n++
			}
		}
	}
	return n
}

// A page range beyond the document is the user's mistake, told in
// Chromium's words: render_failed, not the memory_limit that the agent's
// own SIGKILL of the browser used to look like.
func TestHTMLPageRangesBeyondTheDocument(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	r, err := render.Lookup("html-pdf")
	if err != nil {
		t.Fatal(err)
	}
	input := samples.HTML("One page", "Only one.")
	plan, err := r.Prepare(input, map[string]any{"page_ranges": "3-5"}, render.LimitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	plan.Job.Input = bytes.NewReader(input)
	_, err = m.Run(context.Background(), plan.Job)
	var e *sandbox.Error
	if !errors.As(err, &e) || e.Outcome != sandbox.RenderFailed || !strings.Contains(strings.ToLower(e.Msg), "page range") {
		t.Fatalf("page_ranges 3-5 of one page: %v; want render_failed with Chromium's message", err)
	}
	t.Logf("%s: %s", e.Outcome, e.Msg)
}

// The rootfs ships LibreOffice's settings for hostile documents where every
// soffice reads them (share/registry), finalized: macros never run, links
// are never updated on load.
func TestOfficeSettingsShipInTheRootfs(t *testing.T) {
	t.Parallel()
	root := testenv.RootfsDir(t)
	reg, err := os.Readlink(filepath.Join(root, "usr/lib/libreoffice/share/registry"))
	if err != nil || reg != "/etc/libreoffice/registry" {
		t.Fatalf("share/registry -> %q (%v); the settings would not be read", reg, err)
	}
	b, err := os.ReadFile(filepath.Join(root, "etc/libreoffice/registry/renderbox.xcd"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components []struct {
			Name  string `xml:"name,attr"`
			Nodes []struct {
				Name  string `xml:"name,attr"`
				Nodes []struct {
					Name  string `xml:"name,attr"`
					Props []struct {
						Name      string `xml:"name,attr"`
						Finalized string `xml:"finalized,attr"`
						Value     string `xml:"value"`
					} `xml:"prop"`
				} `xml:"node"`
			} `xml:"node"`
		} `xml:"component-data"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range doc.Components {
		for _, n := range c.Nodes {
			for _, m := range n.Nodes {
				for _, p := range m.Props {
					if p.Finalized == "true" {
						got[c.Name+"/"+n.Name+"/"+m.Name+"/"+p.Name] = p.Value
					}
				}
			}
		}
	}
	for k, v := range map[string]string{
		"Common/Security/Scripting/DisableMacrosExecution": "true",
		"Common/Security/Scripting/MacroSecurityLevel":     "3",
		"Writer/Content/Update/Link":                       "0", // never
		"Calc/Content/Update/Link":                         "1", // never
	} {
		if got[k] != v {
			t.Errorf("%s = %q (finalized), want %q", k, got[k], v)
		}
	}
}
