//go:build !unit

package e2e

import (
	"context"
	"strings"
	"testing"

	rb "github.com/renderbox/renderbox/client"
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
	// Through the client package: submit, wait, download (digest checked).
	c := s.sdk(s.key("office"))
	office := func(input []byte, opts map[string]any) (*rb.Job, string) {
		t.Helper()
		j, outs := renderSDK(t, c, rb.Request{Renderer: "office-pdf", Options: opts, Files: []rb.File{rb.FromBytes("document", input)}})
		if pdf, ok := outs["output.pdf"]; ok {
			return j, testenv.PDFText(t, m, pdf)
		}
		return j, ""
	}

	if j, got := office(doc, nil); j.State != "succeeded" || !strings.Contains(got, text) {
		t.Errorf(".doc: job %s %+v, pdftotext = %q, want succeeded with %q in it", j.State, j.Error, got, text)
	}

	j, got := office(encrypted, map[string]any{"password": password})
	if j.State != "succeeded" || !strings.Contains(got, text) {
		t.Errorf("password docx with its password: job %s %+v, pdftotext = %q, want succeeded with %q in it", j.State, j.Error, got, text)
	}
	shown, err := c.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []map[string]any{j.Options, shown.Options} {
		if o["password"] != render.Redacted {
			t.Errorf("the job shows password %v, want %q", o["password"], render.Redacted)
		}
	}

	for name, opts := range map[string]map[string]any{
		"without a password": nil,
		"with a wrong one":   {"password": "not it"},
	} {
		j, _ := office(encrypted, opts)
		if j.State != "failed" || j.Error == nil || j.Error.Code != "render_failed" || !strings.Contains(j.Error.Message, "password") {
			t.Errorf("password docx %s: %s %+v, want failed render_failed saying a password is needed", name, j.State, j.Error)
		} else if strings.Contains(j.Error.Message, "not it") {
			t.Errorf("password docx %s: the error quotes the password: %q", name, j.Error.Message)
		}
	}
}
