//go:build !unit

package e2e

import (
	"slices"

	"github.com/renderbox/renderbox/internal/samples"
)

// safePDFCases put safe-pdf through the hostile PDFs: damaged files,
// thousands of pages, a 200-inch page, and a document of scripts, an
// attachment, a launch action and a form. Each ends as a PDF of pixels or
// render_failed, never the sandbox's or the service's failure.
func safePDFCases() []hostileCase {
	pdf := samples.PDF("damaged", 3)
	corrupt := slices.Clone(pdf)
	for i := len(corrupt) / 3; i < 2*len(corrupt)/3; i++ {
		corrupt[i] ^= 0x5a
	}
	door := []string{"400:unsupported_input", "400:invalid_input"}
	either := []string{"succeeded", "failed:render_failed"}
	return []hostileCase{
		{name: "safe-pdf of a truncated pdf", renderer: "safe-pdf", input: pdf[:len(pdf)/2], options: map[string]any{"dpi": 50}, want: either, door: door},
		{name: "safe-pdf of a corrupt pdf", renderer: "safe-pdf", input: corrupt, options: map[string]any{"dpi": 50}, want: either, door: door},
		{name: "safe-pdf of 3000 pages", renderer: "safe-pdf", input: samples.PDF("many", 3000), want: []string{"failed:render_failed"}},
		{name: "safe-pdf of a 200-inch page", renderer: "safe-pdf", input: samples.PDFPage(14400, 14400), want: []string{"failed:render_failed"}},
		{name: "safe-pdf of scripts, an attachment, a launch action and a form", renderer: "safe-pdf", input: samples.ActivePDF(1),
			options: map[string]any{"dpi": 72, "grayscale": true}, want: []string{"succeeded"}, noLeak: []string{samples.ActivePDFPayload, "calc.exe"}},
	}
}
