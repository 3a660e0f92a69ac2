//go:build !unit

package e2e

import (
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// The PDF operations through the API: pdf-merge takes its PDFs as several
// file parts, in the order sent, and refuses a part that is not a PDF
// before anything is queued; office-pdf merges documents and a PDF sent
// the same way; pdf-split's parts take the output_name; a document
// pdf-protect encrypted opens again with pdf-unlock and its password, and
// neither job shows a password back.
func TestPDFOperationsThroughTheAPI(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	s := newStack(t, stackOpts{})
	c, key := s.client, s.key("pdf")
	download := func(what string, j jobJSON, n int) [][]byte {
		t.Helper()
		if j.State != "succeeded" || len(j.Outputs) != n {
			t.Fatalf("%s: job %s %s %+v with %d outputs, want succeeded with %d", what, j.ID, j.State, j.Error, len(j.Outputs), n)
		}
		var bs [][]byte
		for _, o := range j.Outputs {
			r := c.do("GET", o.URL, key, "", nil, nil)
			if r.Status != 200 {
				t.Fatalf("GET %s: %d", o.URL, r.Status)
			}
			bs = append(bs, r.Body)
		}
		return bs
	}
	inOrder := func(text string, labels ...string) bool {
		at := 0
		for _, l := range labels {
			i := strings.Index(text[at:], l)
			if i < 0 {
				return false
			}
			at += i + len(l)
		}
		return true
	}

	ct, body := multipartParts(map[string]string{"renderer": "pdf-merge"},
		part{filename: "b.pdf", data: samples.PDF("beta", 2)}, part{filename: "a.pdf", data: samples.PDF("alpha", 1)})
	var j jobJSON
	c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil).json(t, &j)
	merged := download("pdf-merge", j, 1)[0]
	if text := testenv.PDFText(t, m, merged); !inOrder(text, "beta page 1", "beta page 2", "alpha page 1") {
		t.Errorf("merged text %q, want beta's two pages, then alpha's", text)
	}
	ct, body = multipartParts(map[string]string{"renderer": "pdf-merge"},
		part{filename: "a.pdf", data: samples.PDF("alpha", 1)}, part{filename: "logo.png", data: samples.PNGHeader(4, 4)})
	if r := c.do("POST", "/v1/jobs", key, ct, body, nil); r.Status != 400 || r.problemCode(t) != "unsupported_input" || !strings.Contains(string(r.Body), "logo.png") {
		t.Errorf("a PNG among the PDFs: %d %s, want 400 unsupported_input naming it", r.Status, r.Body)
	}

	// office-pdf: two DOCX and a PDF as file parts, merged into one bundle
	// with a bookmark per part (docs/renderers.md, "LibreOffice").
	ct, body = multipartParts(map[string]string{"renderer": "office-pdf", "options": `{"bookmarks": true}`},
		part{filename: "letter.docx", data: samples.DOCX("Letter text")},
		part{filename: "scan.pdf", data: samples.PDF("gamma", 1)},
		part{filename: "annex.docx", data: samples.DOCX("Annex text")})
	var bj jobJSON
	if r := c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil); r.Status != 200 {
		t.Fatalf("office-pdf bundle: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &bj)
	}
	bundle := download("office-pdf bundle", bj, 1)[0]
	if text := testenv.PDFText(t, m, bundle); !inOrder(text, "Letter text", "gamma page 1", "Annex text") {
		t.Errorf("office-pdf bundle says %q, want the letter, the scan, the annex", text)
	}
	if out := testenv.Tool(t, m, "qpdf", bundle, "--json", "--json-key=outlines"); !inOrder(out, `"letter"`, `"scan"`, `"annex"`) {
		t.Errorf("office-pdf bundle's outline %.400s, want letter, scan, annex", out)
	}

	_, j = submitFields(t, c, key, "pdf-split", merged, map[string]any{"options": map[string]any{"ranges": "3,1-2"}, "output_name": "report"}, "?wait=60", nil)
	parts := download("pdf-split", j, 2)
	if j.Outputs[0].Name != "report-1.pdf" || j.Outputs[1].Name != "report-2.pdf" {
		t.Errorf("pdf-split outputs %s, %s, want report-1.pdf, report-2.pdf", j.Outputs[0].Name, j.Outputs[1].Name)
	}
	if text := testenv.PDFText(t, m, parts[0]); !strings.Contains(text, "alpha page 1") || strings.Contains(text, "beta") {
		t.Errorf("report-1.pdf says %q, want the merged third page alone", text)
	}

	const user, owner = "user pass", "owner pass"
	_, j = submitJSON(t, c, key, "pdf-protect", merged, map[string]any{"user_password": user, "owner_password": owner}, "?wait=60", nil)
	locked := download("pdf-protect", j, 1)[0]
	for _, shown := range []jobJSON{j, getJob(t, c, key, j.ID, "")} {
		if shown.Options["user_password"] != render.Redacted || shown.Options["owner_password"] != render.Redacted {
			t.Errorf("pdf-protect's job shows %v, want the passwords %q", shown.Options, render.Redacted)
		}
	}
	_, j = submitJSON(t, c, key, "pdf-unlock", locked, map[string]any{"password": "not it"}, "?wait=60", nil)
	if j.State != "failed" || j.Error == nil || j.Error.Code != "render_failed" || !strings.Contains(j.Error.Message, "invalid password") || strings.Contains(j.Error.Message, "not it") {
		t.Errorf("pdf-unlock with a wrong password: %s %+v, want render_failed saying invalid password, without the password", j.State, j.Error)
	}
	_, j = submitJSON(t, c, key, "pdf-unlock", locked, map[string]any{"password": user}, "?wait=60", nil)
	if text := testenv.PDFText(t, m, download("pdf-unlock", j, 1)[0]); !inOrder(text, "beta page 1", "beta page 2", "alpha page 1") {
		t.Errorf("unlocked text %q, want the merged document's", text)
	}
	if shown := getJob(t, c, key, j.ID, ""); shown.Options["password"] != render.Redacted {
		t.Errorf("pdf-unlock's job shows password %v, want %q", shown.Options["password"], render.Redacted)
	}
}
