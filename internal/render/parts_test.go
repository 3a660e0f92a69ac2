package render_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/wire"
)

// storedZip packs files, in order, as stored entries: what the API makes
// of several file parts.
func storedZip(t *testing.T, method uint16, files ...[2][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range files {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: string(f[0]), Method: method})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(f[1])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// office-pdf's several documents are each sniffed before a sandbox
// starts: office documents and PDFs only; the request converts the
// documents to part-n.pdf, links the PDFs, and merges them after; PDF/A
// and PDF/UA, which a merge would not keep, are refused.
func TestOfficePartsArePlannedAndChecked(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("office-pdf")
	bundle := storedZip(t, zip.Store,
		[2][]byte{[]byte("a.docx"), samples.DOCX("one")},
		[2][]byte{[]byte("b.pdf"), samples.PDF("two", 1)},
		[2][]byte{[]byte("c.odt"), samples.ODT("three")})
	p, err := r.Prepare(bundle, map[string]any{"bookmarks": true}, render.LimitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	req := p.Job.Request
	if req.Office == nil || req.Office.Input != "" || len(req.Office.Parts) != 3 || len(req.After) == 0 {
		t.Fatalf("request %+v: want three office parts and steps after", req)
	}
	for i, want := range []bool{true, false, true} {
		if got := req.Office.Parts[i].Convert; got != want {
			t.Errorf("part %d convert = %v, want %v", i+1, got, want)
		}
	}
	if last := req.After[len(req.After)-1].Argv; last[len(last)-1] != wire.OutputDir+"/output.pdf" {
		t.Errorf("the last step writes %q, want output.pdf", last[len(last)-1])
	}
	for _, tc := range []struct {
		input []byte
		opts  map[string]any
		want  error
		says  string
	}{
		{storedZip(t, zip.Store, [2][]byte{[]byte("a.docx"), samples.DOCX("one")}, [2][]byte{[]byte("b.png"), samples.PNGHeader(4, 4)}),
			nil, render.ErrUnsupportedInput, `"b.png" looks like image/png`},
		{storedZip(t, zip.Store, [2][]byte{[]byte("a.docx"), samples.DOCX("one")}, [2][]byte{[]byte("evil.exe"), []byte("MZ\x90\x00\x03\x00\x00\x00")}),
			nil, render.ErrUnsupportedInput, `"evil.exe" looks like`},
		{storedZip(t, zip.Deflate, [2][]byte{[]byte("a.docx"), samples.DOCX("one")}), nil, render.ErrInvalidInput, "compressed"},
		{bundle, map[string]any{"pdf_a": "2b"}, render.ErrInvalidOptions, "pdf-archive"},
		{bundle, map[string]any{"pdf_ua": true}, render.ErrInvalidOptions, "pdf-archive"},
		{bundle, map[string]any{"titles": "only\ntwo"}, render.ErrInvalidOptions, "titles has 2 lines"},
	} {
		_, err := r.Prepare(tc.input, tc.opts, render.LimitRequest{})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%v: %v, want %v saying %q", tc.opts, err, tc.want, tc.says)
		}
	}
	// A chain that starts with office-pdf takes several documents too.
	c, err := render.Lookup("office-pdf|pdf-protect")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(bundle, map[string]any{"pdf-protect.owner_password": "owner"}, render.LimitRequest{}); err != nil {
		t.Errorf("office-pdf|pdf-protect with several documents: %v", err)
	}
}
