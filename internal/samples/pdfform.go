package samples

import (
	"fmt"
	"strings"
)

// FormPDF returns a one-page PDF with an interactive form and a note
// for pdf-flatten: a text field "name" holding name with no
// appearance stream (a viewer draws it, NeedAppearances), a text field
// "city" holding city with an appearance stream of its own, and a
// FreeText annotation whose appearance says note. The page's own content
// says only "Application form": none of the three is in it, so
// pdftotext, which reads page content and not annotations, finds them
// only once they are flattened into the page.
func FormPDF(name, city, note string) []byte { return formPDF(name, city, note, "") }

// ScriptedFormPDF is FormPDF with JavaScript that runs when the document
// opens (an OpenAction) and a document-level script in its names tree:
// what PDF/A forbids and pdf-archive must drop.
func ScriptedFormPDF(name, city, note string) []byte {
	return formPDF(name, city, note, "/OpenAction << /S /JavaScript /JS (app.alert\\(1\\);) >> /Names << /JavaScript << /Names [(init) << /S /JavaScript /JS (this.print\\(\\);) >>] >> >>")
}

func formPDF(name, city, note, catalog string) []byte {
	for _, s := range []string{name, city, note} {
		if strings.ContainsAny(s, `()\`) {
			panic("samples.FormPDF: text must not contain ( ) or \\")
		}
	}
	page := "BT /F1 18 Tf 72 720 Td (Application form) Tj ET"
	cityAP := fmt.Sprintf("/Tx BMC q BT /F1 12 Tf 2 6 Td (%s) Tj ET Q EMC", city)
	noteAP := fmt.Sprintf("q 1 1 0.6 rg 0 0 200 30 re f BT 0 g /F1 12 Tf 6 10 Td (%s) Tj ET Q", note)
	// 1 catalog, 2 pages, 3 font, 4 page, 5 content, 6 name field,
	// 7 city field, 8 city's appearance, 9 note, 10 note's appearance.
	return pdfFile([]string{
		"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [6 0 R 7 0 R] /NeedAppearances true /DA (/Helv 12 Tf 0 g) /DR << /Font << /Helv 3 0 R /F1 3 0 R >> >> >> " + catalog + " >>",
		"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R /Annots [6 0 R 7 0 R 9 0 R] >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(page), page),
		fmt.Sprintf("<< /Type /Annot /Subtype /Widget /FT /Tx /T (name) /V (%s) /DA (/Helv 12 Tf 0 g) /Rect [72 600 372 624] /F 4 /P 4 0 R >>", name),
		fmt.Sprintf("<< /Type /Annot /Subtype /Widget /FT /Tx /T (city) /V (%s) /DA (/Helv 12 Tf 0 g) /Rect [72 560 372 584] /F 4 /P 4 0 R /AP << /N 8 0 R >> >>", city),
		fmt.Sprintf("<< /Type /XObject /Subtype /Form /BBox [0 0 300 24] /Resources << /Font << /F1 3 0 R >> >> /Length %d >>\nstream\n%s\nendstream", len(cityAP), cityAP),
		fmt.Sprintf("<< /Type /Annot /Subtype /FreeText /Rect [72 480 272 510] /F 0 /Contents (%s) /DA (/Helv 12 Tf 0 g) /P 4 0 R /AP << /N 10 0 R >> >>", note),
		fmt.Sprintf("<< /Type /XObject /Subtype /Form /BBox [0 0 200 30] /Resources << /Font << /F1 3 0 R >> >> /Length %d >>\nstream\n%s\nendstream", len(noteAP), noteAP),
	})
}
