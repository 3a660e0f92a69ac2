//go:build !unit

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rb "github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// stepsOf reads a job's diagnostics.steps from GET /v1/jobs/{id}.
func stepsOf(t *testing.T, c *client, key, id string) []string {
	t.Helper()
	var j struct {
		Diagnostics struct {
			Steps []struct {
				Name        string  `json:"name"`
				Outcome     string  `json:"outcome"`
				SandboxMode string  `json:"sandbox_mode"`
				Seconds     float64 `json:"seconds"`
			} `json:"steps"`
		} `json:"diagnostics"`
	}
	c.do("GET", "/v1/jobs/"+id, key, "", nil, nil).json(t, &j)
	var steps []string
	for _, s := range j.Diagnostics.Steps {
		if s.SandboxMode == "" || s.Seconds <= 0 {
			t.Errorf("job %s: step %s has sandbox_mode %q and %g seconds", id, s.Name, s.SandboxMode, s.Seconds)
		}
		steps = append(steps, s.Name+" "+s.Outcome)
	}
	return steps
}

// Issue 14's safe-pdf through the API: a PDF with a script, an
// attachment, a launch action and a form comes back as a PDF of its pixels
// with a searchable text layer and none of them; the job lists its two
// stages. A document over max_pages fails render_failed after the first
// stage, with nothing stored.
func TestSafePDFThroughTheAPI(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	s := newStack(t, stackOpts{})
	c, key := s.client, s.key("safe")
	input := samples.ActivePDF(2)

	// Three sandboxes of Tesseract on a shared machine may take longer
	// than one ?wait=.
	ended := func(j jobJSON) jobJSON {
		t.Helper()
		waitFor(t, "safe-pdf job "+j.ID+" to end", 5*time.Minute, func() bool { j = getJob(t, c, key, j.ID, ""); return j.terminal() })
		return j
	}
	// Through the client package: submit, wait, download (digest checked).
	sj, outs := renderSDK(t, s.sdk(key), rb.Request{Renderer: "safe-pdf", Options: map[string]any{"ocr": true, "ocr_language": "eng"},
		Files: []rb.File{rb.FromBytes("active.pdf", input)}})
	out, ok := outs["output.pdf"]
	if sj.State != "succeeded" || len(sj.Outputs) != 1 || !ok || sj.Outputs[0].MediaType != "application/pdf" {
		t.Fatalf("safe-pdf: job %s %s %+v, outputs %+v; want succeeded with output.pdf", sj.ID, sj.State, sj.Error, sj.Outputs)
	}
	if text := strings.Join(strings.Fields(testenv.PDFText(t, m, out)), " "); !strings.Contains(text, "Quarterly harvest report") || !strings.Contains(text, "potatoes page 2") {
		t.Errorf("the safe PDF's text %q, want the original's words on both pages", text)
	}
	qj := testenv.Tool(t, m, "qpdf", out, "--json")
	for _, k := range []string{"/JavaScript", "/OpenAction", "/EmbeddedFiles", "/Launch", "/AcroForm", "/Annots"} {
		if strings.Contains(qj, `"`+k+`"`) {
			t.Errorf("the safe PDF's qpdf --json has %s", k)
		}
	}
	if info := testenv.Tool(t, m, "pdfinfo", out); !strings.Contains(info, "Pages:           2") {
		t.Errorf("pdfinfo of the safe PDF:\n%s\nwant 2 pages", info)
	}
	if got, want := fmt.Sprint(stepsOf(t, c, key, sj.ID)), "[rasterize succeeded rebuild succeeded]"; got != want {
		t.Errorf("the job's steps %s, want %s", got, want)
	}

	_, j := submitFields(t, c, key, "safe-pdf", input, map[string]any{"limits": map[string]any{"max_pages": 1}}, "?wait=60", nil)
	j = ended(j)
	if j.State != "failed" || j.Error == nil || j.Error.Code != "render_failed" || !strings.Contains(j.Error.Message, "stage rasterize") ||
		!strings.Contains(j.Error.Message, "more pages than max_pages, 1") || len(j.Outputs) != 0 {
		t.Errorf("two pages with max_pages 1: job %s %+v, outputs %+v; want failed render_failed after the rasterize stage, no output", j.State, j.Error, j.Outputs)
	}
	if got, want := fmt.Sprint(stepsOf(t, c, key, j.ID)), "[rasterize render_failed]"; got != want {
		t.Errorf("the failed job's steps %s, want %s", got, want)
	}
}
