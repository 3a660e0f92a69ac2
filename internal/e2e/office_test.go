package e2e

import (
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Issue 13 through the API: a .doc converts with its text; a
// password-protected .docx converts with its password, fails at once
// saying a password is needed without it, and the job never shows the
// password back.
func TestOfficeDocAndPasswordThroughTheAPI(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	const text, password = "Invoice 2026-117", "s3cret pass"
	made := testenv.OfficeFiles(t, m,
		testenv.OfficeSave{Input: "a.docx", Data: samples.DOCX(text), Filter: "MS Word 97"},
		testenv.OfficeSave{Input: "a.docx", Data: samples.DOCX(text), Filter: "MS Word 2007 XML", Password: password},
	)
	doc, encrypted := made[0], made[1]
	if got := render.Sniff(encrypted); got != render.TypeOOXMLEncrypted {
		t.Fatalf("the encrypted docx sniffs as %s", got)
	}
	s := newStack(t, stackOpts{})
	c, key := s.client, s.key("office")

	pdfOf := func(j jobJSON) string {
		t.Helper()
		if j.State != "succeeded" || len(j.Outputs) != 1 {
			t.Fatalf("job %s %s (%+v), want succeeded with output.pdf", j.ID, j.State, j.Error)
		}
		r := c.do("GET", j.Outputs[0].URL, key, "", nil, nil)
		if r.Status != 200 {
			t.Fatalf("GET %s: %d", j.Outputs[0].URL, r.Status)
		}
		return testenv.PDFText(t, m, r.Body)
	}

	_, j := submitJSON(t, c, key, "office-pdf", doc, nil, "?wait=60", nil)
	if got := pdfOf(j); !strings.Contains(got, text) {
		t.Errorf(".doc: pdftotext = %q, want %q in it", got, text)
	}

	_, j = submitJSON(t, c, key, "office-pdf", encrypted, map[string]any{"password": password}, "?wait=60", nil)
	if got := pdfOf(j); !strings.Contains(got, text) {
		t.Errorf("password docx with its password: pdftotext = %q, want %q in it", got, text)
	}
	for _, shown := range []jobJSON{j, getJob(t, c, key, j.ID, "")} {
		if shown.Options["password"] != render.Redacted {
			t.Errorf("the job shows password %v, want %q", shown.Options["password"], render.Redacted)
		}
	}

	for name, opts := range map[string]map[string]any{
		"without a password": nil,
		"with a wrong one":   {"password": "not it"},
	} {
		_, j = submitJSON(t, c, key, "office-pdf", encrypted, opts, "?wait=60", nil)
		if j.State != "failed" || j.Error == nil || j.Error.Code != "render_failed" || !strings.Contains(j.Error.Message, "password") {
			t.Errorf("password docx %s: %s %+v, want failed render_failed saying a password is needed", name, j.State, j.Error)
		} else if strings.Contains(j.Error.Message, "not it") {
			t.Errorf("password docx %s: the error quotes the password: %q", name, j.Error.Message)
		}
	}
}
