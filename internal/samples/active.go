package samples

import (
	"fmt"
	"strings"
)

// ActivePDFPayload is the content of ActivePDF's embedded file.
const ActivePDFPayload = "EMBEDDED-PAYLOAD-7f3a"

// ActivePDF returns a PDF of pages US Letter pages, each saying, in large
// type, "Quarterly harvest report" and "Carrots and potatoes page N", that
// carries everything safe-pdf must leave behind: JavaScript run on open
// (an OpenAction and a document-level script), an embedded file, a link
// whose action launches a program, and a form with a filled text field.
func ActivePDF(pages int) []byte {
	// 1 catalog, 2 pages, 3 font, 4 script, 5 file spec, 6 embedded file,
	// 7 form field, 8 launch link, then a page and its content per page.
	kids := make([]string, pages)
	for i := range kids {
		kids[i] = fmt.Sprintf("%d 0 R", 9+2*i)
	}
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R /OpenAction 4 0 R" +
			" /Names << /JavaScript << /Names [(init) 4 0 R] >> /EmbeddedFiles << /Names [(secret.txt) 5 0 R] >> >>" +
			" /AcroForm << /Fields [7 0 R] /NeedAppearances true >> >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), pages),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		`<< /Type /Action /S /JavaScript /JS (app.alert\(1\); this.exportDataObject\({cName: "secret.txt", nLaunch: 2}\);) >>`,
		"<< /Type /Filespec /F (secret.txt) /UF (secret.txt) /EF << /F 6 0 R >> >>",
		fmt.Sprintf("<< /Type /EmbeddedFile /Length %d >>\nstream\n%s\nendstream", len(ActivePDFPayload), ActivePDFPayload),
		"<< /Type /Annot /Subtype /Widget /FT /Tx /T (account) /V (filled-in) /Rect [72 560 300 590] /P 9 0 R /F 4 >>",
		"<< /Type /Annot /Subtype /Link /Rect [72 480 300 510] /Border [0 0 0] /A << /S /Launch /F (calc.exe) /Win << /F (cmd.exe) /P (/c calc) >> >> >>",
	}
	for i := range pages {
		stream := fmt.Sprintf("BT /F1 32 Tf 72 700 Td (Quarterly harvest report) Tj 0 -48 Td (Carrots and potatoes page %d) Tj ET", i+1)
		annots := ""
		if i == 0 {
			annots = " /Annots [7 0 R 8 0 R]"
		}
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R%s >>", 10+2*i, annots),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream))
	}
	return pdfFile(objs)
}
