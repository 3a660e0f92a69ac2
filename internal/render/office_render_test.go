package render_test

import (
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// The text every office test document carries.
const officeText = "Invoice 2026-117"

// binaryOffice makes .doc, .xls and .ppt from generated OOXML with
// LibreOffice itself, in a sandbox.
func binaryOffice(t *testing.T, m *sandbox.Manager) map[string][]byte {
	t.Helper()
	got := testenv.OfficeFiles(t, m,
		testenv.OfficeSave{Input: "a.docx", Data: samples.DOCX(officeText), Filter: "MS Word 97"},
		testenv.OfficeSave{Input: "a.xlsx", Data: samples.XLSX(officeText), Filter: "MS Excel 97"},
		testenv.OfficeSave{Input: "a.pptx", Data: samples.PPTX(officeText), Filter: "MS PowerPoint 97"},
	)
	return map[string][]byte{"doc": got[0], "xls": got[1], "ppt": got[2]}
}

// Every office format office-pdf accepts beyond OOXML and packaged ODF is
// told from its bytes and converts, its text in the PDF: the binary
// Office formats, an ODF drawing and template, flat ODF, StarOffice XML.
func TestOfficeFormatsToPDF(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	docs := binaryOffice(t, m)
	docs["odg"] = samples.ODG(officeText)
	docs["ott"] = samples.OTT(officeText)
	docs["fodt"] = samples.FODT(officeText)
	docs["sxw"] = samples.SXW(officeText)
	want := map[string]string{
		"doc": render.TypeDOC, "xls": render.TypeXLS, "ppt": render.TypePPT, "odg": render.TypeODG,
		"ott": render.TypeOTT, "fodt": render.TypeFODT, "sxw": render.TypeSXW,
	}
	for name, doc := range docs {
		if got := render.Sniff(doc); got != want[name] {
			t.Errorf("%s: sniffed as %s, want %s", name, got, want[name])
			continue
		}
		out, _ := renderOK(t, m, "office-pdf", doc, nil)
		if text := pdfText(t, m, out["output.pdf"]); !strings.Contains(text, officeText) {
			t.Errorf("%s: pdftotext = %q, want %q in it", name, text, officeText)
		}
	}
}
