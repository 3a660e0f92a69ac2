//go:build !unit

package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	rb "github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Issue 14's second slice through the API, by the client package: a form
// flattened, then the flattened document stamped on its second page only
// and watermarked, a PNG sent after the PDF stamped on its first, a PDF's
// first page on the others; a stamp without its text or a mark file is
// refused before anything is queued.
func TestPDFFlattenAndStampThroughTheAPI(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	s := newStack(t, stackOpts{})
	c := s.sdk(s.key("stamp"))
	render := func(renderer string, opts map[string]any, files ...rb.File) (*rb.Job, []byte) {
		t.Helper()
		j, outs := renderSDK(t, c, rb.Request{Renderer: renderer, Options: opts, Files: files})
		pdf, ok := outs["output.pdf"]
		if j.State != "succeeded" || len(outs) != 1 || !ok {
			t.Fatalf("%s: job %s %s %+v with outputs %+v, want succeeded with output.pdf", renderer, j.ID, j.State, j.Error, j.Outputs)
		}
		return j, pdf
	}
	page := func(pdf []byte, n string) string {
		return testenv.Tool(t, m, "pdftotext", pdf, "-f", n, "-l", n)
	}

	_, flat := render("pdf-flatten", nil, rb.FromBytes("form.pdf", samples.FormPDF("Ada Lovelace", "London", "Seen")))
	if text := page(flat, "1"); !strings.Contains(text, "Ada Lovelace") || !strings.Contains(text, "London") {
		t.Errorf("the flattened page says %q, want the fields' values", text)
	}
	if out := testenv.Tool(t, m, "qpdf", flat, "--json=2", "--json-key=acroform"); !strings.Contains(out, `"hasacroform": false`) {
		t.Errorf("the flattened PDF still has a form: %s", out)
	}

	doc := samples.PDF("report", 3)
	j, stamped := render("pdf-stamp", map[string]any{"text": "APPROVED", "pages": "2"}, rb.FromBytes("report.pdf", doc))
	for n, want := range map[string]bool{"1": false, "2": true, "3": false} {
		if text := page(stamped, n); strings.Contains(text, "APPROVED") != want || !strings.Contains(text, "report page "+n) {
			t.Errorf("stamped page %s says %q, want APPROVED on it: %v", n, text, want)
		}
	}
	if shown, err := c.Get(context.Background(), j.ID); err != nil || shown.Options["text"] != "APPROVED" || shown.Options["pages"] != "2" {
		t.Errorf("the stamp's job shows options %v (%v)", shown.Options, err)
	}
	_, marked := render("pdf-watermark", map[string]any{"text": "DRAFT", "rotation": 0}, rb.FromBytes("stamped.pdf", stamped))
	if text := testenv.PDFText(t, m, marked); strings.Count(text, "DRAFT") != 3 || !strings.Contains(text, "APPROVED") {
		t.Errorf("the watermarked document says %q, want DRAFT on its 3 pages and the stamp kept", text)
	}

	// A PNG as the mark: the PDF and the PNG as two file parts.
	red := samples.PNG(samples.Image(40, 30, 0, 0, 40))
	_, sealed := render("pdf-stamp", map[string]any{"position": "center", "image_width_mm": 80, "pages": "1"},
		rb.FromBytes("report.pdf", doc), rb.FromBytes("seal.png", red))
	if list := testenv.Tool(t, m, "pdfimages", sealed, "-list"); !strings.Contains(list, "\n   1     0 image      40    30") || strings.Contains(list, "\n   2 ") {
		t.Errorf("the sealed document's images:\n%s\nwant the 40×30 PNG on page 1 alone", list)
	}

	// A PDF as the mark: its first page, laid on the pages chosen.
	_, headed := render("pdf-stamp", map[string]any{"position": "bottom", "rotation": 0, "image_width_mm": 100, "pages": "2-3"},
		rb.FromBytes("report.pdf", doc), rb.FromBytes("letterhead.pdf", samples.PDF("LETTERHEAD", 2)))
	if text := testenv.PDFText(t, m, headed); strings.Count(text, "LETTERHEAD page 1") != 2 || strings.Contains(text, "LETTERHEAD page 2") {
		t.Errorf("the document stamped with a PDF says %q, want the mark's first page on pages 2 and 3", text)
	}

	_, err := c.Submit(context.Background(), rb.Request{Renderer: "pdf-stamp", Options: map[string]any{"pages": "1"}, Files: []rb.File{rb.FromBytes("report.pdf", doc)}})
	var refused *rb.Error
	if !errors.As(err, &refused) || refused.Status != 400 || refused.Code != "invalid_options" || !strings.Contains(refused.Detail, "text") {
		t.Errorf("a stamp without text: %v, want 400 invalid_options naming text", err)
	}
}
