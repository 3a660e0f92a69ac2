package e2e

import (
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Issue 14's second slice through the API: a form flattened, then the
// flattened document stamped on its second page only and watermarked, a
// PNG sent after the PDF stamped on its first, a PDF's first page on the
// others; a stamp without its text or a mark file is refused before
// anything is queued.
func TestPDFFlattenAndStampThroughTheAPI(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	s := newStack(t, stackOpts{})
	c, key := s.client, s.key("stamp")
	download := func(what string, j jobJSON) []byte {
		t.Helper()
		if j.State != "succeeded" || len(j.Outputs) != 1 {
			t.Fatalf("%s: job %s %s %+v with %d outputs, want succeeded with output.pdf", what, j.ID, j.State, j.Error, len(j.Outputs))
		}
		pdf, ok := downloadAll(t, c, key, j)["output.pdf"]
		if !ok {
			t.Fatalf("%s: outputs %+v, want output.pdf", what, j.Outputs)
		}
		return pdf
	}
	page := func(pdf []byte, n string) string {
		return testenv.Tool(t, m, "pdftotext", pdf, "-f", n, "-l", n)
	}

	_, j := submitJSON(t, c, key, "pdf-flatten", samples.FormPDF("Ada Lovelace", "London", "Seen"), nil, "?wait=60", nil)
	flat := download("pdf-flatten", j)
	if text := page(flat, "1"); !strings.Contains(text, "Ada Lovelace") || !strings.Contains(text, "London") {
		t.Errorf("the flattened page says %q, want the fields' values", text)
	}
	if out := testenv.Tool(t, m, "qpdf", flat, "--json=2", "--json-key=acroform"); !strings.Contains(out, `"hasacroform": false`) {
		t.Errorf("the flattened PDF still has a form: %s", out)
	}

	doc := samples.PDF("report", 3)
	_, j = submitJSON(t, c, key, "pdf-stamp", doc, map[string]any{"text": "APPROVED", "pages": "2"}, "?wait=60", nil)
	stamped := download("pdf-stamp", j)
	for n, want := range map[string]bool{"1": false, "2": true, "3": false} {
		if text := page(stamped, n); strings.Contains(text, "APPROVED") != want || !strings.Contains(text, "report page "+n) {
			t.Errorf("stamped page %s says %q, want APPROVED on it: %v", n, text, want)
		}
	}
	if shown := getJob(t, c, key, j.ID, ""); shown.Options["text"] != "APPROVED" || shown.Options["pages"] != "2" {
		t.Errorf("the stamp's job shows options %v", shown.Options)
	}
	_, j = submitJSON(t, c, key, "pdf-watermark", stamped, map[string]any{"text": "DRAFT", "rotation": 0}, "?wait=60", nil)
	if text := testenv.PDFText(t, m, download("pdf-watermark", j)); strings.Count(text, "DRAFT") != 3 || !strings.Contains(text, "APPROVED") {
		t.Errorf("the watermarked document says %q, want DRAFT on its 3 pages and the stamp kept", text)
	}

	// A PNG as the mark: the PDF and the PNG as two file parts.
	red := samples.PNG(samples.Image(40, 30, 0, 0, 40))
	ct, body := multipartParts(map[string]string{"renderer": "pdf-stamp", "options": `{"position":"center","image_width_mm":80,"pages":"1"}`},
		part{filename: "report.pdf", data: doc}, part{filename: "seal.png", data: red})
	c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil).json(t, &j)
	sealed := download("pdf-stamp with a PNG", j)
	if list := testenv.Tool(t, m, "pdfimages", sealed, "-list"); !strings.Contains(list, "\n   1     0 image      40    30") || strings.Contains(list, "\n   2 ") {
		t.Errorf("the sealed document's images:\n%s\nwant the 40×30 PNG on page 1 alone", list)
	}

	// A PDF as the mark: its first page, laid on the pages chosen.
	ct, body = multipartParts(map[string]string{"renderer": "pdf-stamp", "options": `{"position":"bottom","rotation":0,"image_width_mm":100,"pages":"2-3"}`},
		part{filename: "report.pdf", data: doc}, part{filename: "letterhead.pdf", data: samples.PDF("LETTERHEAD", 2)})
	c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil).json(t, &j)
	headed := download("pdf-stamp with a PDF", j)
	if text := testenv.PDFText(t, m, headed); strings.Count(text, "LETTERHEAD page 1") != 2 || strings.Contains(text, "LETTERHEAD page 2") {
		t.Errorf("the document stamped with a PDF says %q, want the mark's first page on pages 2 and 3", text)
	}

	r, _ := submitJSON(t, c, key, "pdf-stamp", doc, map[string]any{"pages": "1"}, "", nil)
	if r.Status != 400 || r.problemCode(t) != "invalid_options" || !strings.Contains(string(r.Body), "text") {
		t.Errorf("a stamp without text: %d %s, want 400 invalid_options naming text", r.Status, r.Body)
	}
}
