//go:build !unit

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	_ "image/png"
	"mime/multipart"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
)

// part is one multipart file part.
type part struct {
	filename, contentType string
	data                  []byte
}

// multipartParts is a body of fields and file parts, in order.
func multipartParts(fields map[string]string, parts ...part) (string, []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, p.filename))
		ct := p.contentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
		w, _ := mw.CreatePart(h)
		_, _ = w.Write(p.data)
	}
	_ = mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// hostTool runs a poppler tool on the host over a PDF the test renderer
// made and returns its output.
func hostTool(t *testing.T, prog string, pdf []byte, args ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "in.pdf")
	if err := os.WriteFile(f, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	args = append(args, f)
	if prog == "pdftotext" {
		args = append(args, "-")
	}
	out, err := exec.Command(prog, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s (install poppler-utils: make setup)", prog, err, out)
	}
	return string(out)
}

// rasterAt96 is the PDF's first page at 96 dpi.
func rasterAt96(t *testing.T, pdf []byte) image.Image {
	t.Helper()
	dir := t.TempDir()
	f := filepath.Join(dir, "in.pdf")
	_ = os.WriteFile(f, pdf, 0o600)
	if out, err := exec.Command("pdftoppm", "-r", "96", "-f", "1", "-l", "1", "-png", "-singlefile", f, filepath.Join(dir, "p")).CombinedOutput(); err != nil {
		t.Fatalf("pdftoppm: %v: %s", err, out)
	}
	r, err := os.Open(filepath.Join(dir, "p.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	img, _, err := image.Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func rgbIs(c color.Color, r0, g0, b0 int) bool {
	r, g, b, _ := c.RGBA()
	near := func(v uint32, want int) bool { d := int(v>>8) - want; return d > -40 && d < 40 }
	return near(r, r0) && near(g, g0) && near(b, b0)
}

type jobDiag struct {
	Input struct {
		Type string `json:"type"`
	} `json:"input"`
	Diagnostics *struct {
		RefusedRequests []string `json:"refused_requests"`
		MissingFiles    []string `json:"missing_files"`
		ConsoleErrors   []string `json:"console_errors"`
	} `json:"diagnostics"`
}

// TestHTMLReportWithItsFilesThroughTheAPI sends an HTML report with its
// stylesheet, PNG, web font and script-drawn chart as several parts and as
// a ZIP, and checks the PDF's text, fonts and pixels; then the same page
// with a request to another origin, listed and, when asked, fatal.
func TestHTMLReportWithItsFilesThroughTheAPI(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key("fidelity")
	c := s.client
	font, err := os.ReadFile(filepath.Join(rootfs.Dir(testenv.RootfsTree(t)), "usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"))
	if err != nil {
		t.Fatal(err)
	}
	site := samples.Report(font)
	opts := `{"javascript": true, "wait_delay": 1, "margin_mm": 0}`
	var parts []part
	for _, n := range site.Order {
		parts = append(parts, part{filename: n, data: site.Files[n]})
	}
	check := func(how string, r *response) {
		t.Helper()
		var j jobJSON
		r.json(t, &j)
		if r.Status != 200 || j.State != "succeeded" {
			t.Fatalf("%s: %d %s", how, r.Status, r.Body)
		}
		var d jobDiag
		r.json(t, &d)
		if d.Input.Type != "application/zip" || d.Diagnostics != nil {
			t.Errorf("%s: input type %q, diagnostics %+v; want application/zip and none", how, d.Input.Type, d.Diagnostics)
		}
		pdf := c.do("GET", j.Outputs[0].URL, key, "", nil, nil).Body
		text := hostTool(t, "pdftotext", pdf)
		if !strings.Contains(text, "Quarterly fidelity report") || !strings.Contains(text, "Chart drawn by script") {
			t.Errorf("%s: pdftotext = %q, want the title and the chart", how, text)
		}
		if fonts := hostTool(t, "pdffonts", pdf); !strings.Contains(fonts, "DejaVuSansMono-Bold") {
			t.Errorf("%s: pdffonts = %q, want the web font", how, fonts)
		}
		img := rasterAt96(t, pdf)
		if !rgbIs(img.At(50, 250), 255, 0, 0) || !rgbIs(img.At(350, 250), 0, 0, 255) || !rgbIs(img.At(200, 250), 255, 255, 255) {
			t.Errorf("%s: pixels %v %v %v, want the PNG's red, the chart's blue, white", how, img.At(50, 250), img.At(350, 250), img.At(200, 250))
		}
	}
	ct, body := multipartParts(map[string]string{"renderer": "html-pdf", "options": opts}, parts...)
	check("several parts", c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil))
	zipBody, _ := json.Marshal(map[string]any{"renderer": "html-pdf", "input_base64": base64.StdEncoding.EncodeToString(site.Zip()), "options": json.RawMessage(opts)})
	check("a ZIP", c.do("POST", "/v1/jobs?wait=60", key, "application/json", zipBody, nil))

	// A request to another origin: the job succeeds and says so, or
	// fails when asked to.
	beacon := append(bytes.Clone(site.Files["index.html"]), []byte(`<img src="http://127.0.0.1:9/beacon.png">`)...)
	parts[0].data = beacon
	for _, failOn := range []bool{false, true} {
		ct, body := multipartParts(map[string]string{"renderer": "html-pdf", "options": fmt.Sprintf(`{"fail_on_resource_error": %v}`, failOn)}, parts...)
		r := c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil)
		var j jobJSON
		var d jobDiag
		r.json(t, &j)
		r.json(t, &d)
		wantState := map[bool]string{false: "succeeded", true: "failed"}[failOn]
		if j.State != wantState || (failOn && (j.Error == nil || j.Error.Code != "render_failed" || !strings.Contains(j.Error.Message, "127.0.0.1:9"))) {
			t.Errorf("fail_on_resource_error %v: %s %+v, want %s (render_failed naming the request)", failOn, j.State, j.Error, wantState)
		}
		if d.Diagnostics == nil || !slices.Contains(d.Diagnostics.RefusedRequests, "http://127.0.0.1:9/beacon.png") {
			t.Errorf("fail_on_resource_error %v: diagnostics %+v, want the beacon refused", failOn, d.Diagnostics)
		}
	}

	// Parts that cannot be paths among the files are refused up front.
	for name, ps := range map[string][]part{
		"climbs out":  {{filename: "index.html", data: beacon}, {filename: "../etc/passwd", data: []byte("x")}},
		"no filename": {{filename: "index.html", data: beacon}, {filename: "", data: []byte("x")}},
		"twice":       {{filename: "index.html", data: beacon}, {filename: "index.html", data: []byte("x")}},
	} {
		ct, body := multipartParts(map[string]string{"renderer": "html-pdf"}, ps...)
		if r := c.do("POST", "/v1/jobs", key, ct, body, nil); r.Status != 400 || r.problemCode(t) != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", name, r.Status, r.Body)
		}
	}
}

// TestDeclaredTypesThroughTheAPI: text the bytes alone do not make HTML is
// taken as HTML when the client says so, in a field or in the part's type.
func TestDeclaredTypesThroughTheAPI(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key("declared")
	c := s.client
	prose := []byte("Plain words, printed as a page.\n")
	ct, body := multipartBody(map[string]string{"renderer": "html-pdf"}, prose)
	r := c.do("POST", "/v1/jobs", key, ct, body, nil)
	if r.Status != 400 || r.problemCode(t) != "unsupported_input" || !strings.Contains(string(r.Body), "input_type=text/html") {
		t.Errorf("undeclared prose: %d %s, want 400 unsupported_input saying how to declare it", r.Status, r.Body)
	}
	for how, send := range map[string]func() (string, []byte){
		"input_type field": func() (string, []byte) {
			return multipartBody(map[string]string{"renderer": "html-pdf", "input_type": "text/html; charset=utf-8"}, prose)
		},
		"part type": func() (string, []byte) {
			return multipartParts(map[string]string{"renderer": "html-pdf"}, part{filename: "page.html", contentType: "text/html", data: prose})
		},
		"json": func() (string, []byte) {
			b, _ := json.Marshal(map[string]any{"renderer": "html-pdf", "input_type": "text/html", "input_base64": base64.StdEncoding.EncodeToString(prose)})
			return "application/json", b
		},
	} {
		ct, body := send()
		r := c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil)
		var j jobJSON
		var d jobDiag
		r.json(t, &j)
		r.json(t, &d)
		if j.State != "succeeded" || d.Input.Type != "text/html" {
			t.Errorf("%s: %d %s, want succeeded with input type text/html", how, r.Status, r.Body)
			continue
		}
		if text := hostTool(t, "pdftotext", c.do("GET", j.Outputs[0].URL, key, "", nil, nil).Body); !strings.Contains(text, "Plain words, printed as a page.") {
			t.Errorf("%s: pdftotext = %q", how, text)
		}
	}
	// CSV is text only a declaration tells from other text.
	csv := []byte("name,amount\n\"Smith, J\",42\n")
	ct, body = multipartBody(map[string]string{"renderer": "office-pdf", "input_type": "text/csv"}, csv)
	var cj jobJSON
	c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil).json(t, &cj)
	if cj.State != "succeeded" {
		t.Errorf("a CSV declared text/csv: %s %+v, want succeeded", cj.State, cj.Error)
	} else if text := hostTool(t, "pdftotext", c.do("GET", cj.Outputs[0].URL, key, "", nil, nil).Body); !strings.Contains(text, "Smith, J") || strings.Contains(text, `"Smith`) {
		t.Errorf("the CSV's PDF reads %q, want the cell Smith, J without its quotes", text)
	}
	// A declared text type on bytes that are not text is refused.
	ct, body = multipartBody(map[string]string{"renderer": "html-pdf", "input_type": "text/html"}, samples.PDF("x", 1))
	if r := c.do("POST", "/v1/jobs", key, ct, body, nil); r.Status != 400 || r.problemCode(t) != "unsupported_input" {
		t.Errorf("a PDF declared HTML: %d %s, want 400 unsupported_input", r.Status, r.Body)
	}
	// Every new option is published with its bounds and defaults.
	var cat struct {
		Renderers []struct {
			Name    string `json:"name"`
			Options []struct {
				Name            string   `json:"name"`
				Default         any      `json:"default"`
				Maximum         *float64 `json:"maximum"`
				MaxLength       int      `json:"max_length"`
				CaseInsensitive bool     `json:"case_insensitive"`
			} `json:"options"`
		} `json:"renderers"`
	}
	c.do("GET", "/v1/renderers", key, "", nil, nil).json(t, &cat)
	published := map[string]bool{}
	for _, rd := range cat.Renderers {
		for _, o := range rd.Options {
			published[rd.Name+"."+o.Name] = true
			switch {
			case rd.Name == "html-pdf" && o.Name == "paper" && !o.CaseInsensitive:
				t.Errorf("html-pdf paper is not published as case-insensitive")
			case o.Name == "wait_delay" && (o.Maximum == nil || *o.Maximum != render.MaxCeilingTimeout.Seconds()):
				// Any timeout less 5 s, checked per job against its own.
				t.Errorf("%s wait_delay maximum %v, want %g", rd.Name, o.Maximum, render.MaxCeilingTimeout.Seconds())
			case o.Name == "header_html" && o.MaxLength != 4096:
				t.Errorf("%s header_html max_length %d, want 4096", rd.Name, o.MaxLength)
			}
		}
	}
	for _, want := range []string{"html-pdf.wait_for_expression", "html-pdf.wait_for_selector", "html-pdf.header_html", "html-pdf.footer_html",
		"html-pdf.margin_top", "html-pdf.paper_width", "html-pdf.generate_outline", "html-pdf.tagged", "html-pdf.omit_background",
		"html-pdf.single_page", "html-pdf.fail_on_resource_error", "html-pdf.fail_on_console_error", "html-pdf.entry",
		"html-png.format", "html-png.clip_width", "html-png.selector", "markdown-pdf.stylesheet"} {
		if !published[want] {
			t.Errorf("GET /v1/renderers does not publish %s", want)
		}
	}
}
