package render

import (
	"regexp"

	"github.com/renderbox/renderbox/internal/wire"
)

// pdf-flatten: a form's fields and the annotations over a page
// become part of the page, drawn as their appearance streams show them.

// register adds renderers of the PDF operations that make one output.pdf:
// each file of them joins the catalogue and the output rules from its own
// init, beside the first slice's (pdf.go).
func register(rs ...*Renderer) {
	for _, r := range rs {
		catalogue[r.Name] = resolve(r)
		outputRules[r.Name] = outputRule{re: regexp.MustCompile(`^output\.pdf$`)}
	}
}

func init() { register(pdfFlatten()) }

// flattenSteps run qpdf once. --generate-appearances draws the text fields
// and list boxes whose values have no appearance yet (a form saved with
// NeedAppearances leaves them to the viewer, and flattening a field
// without one would drop its value); --flatten-annotations then puts every
// chosen annotation's appearance into the page's content and removes the
// annotation, and the form with the last of its fields. It drops the
// annotations it does not flatten: those without an appearance (a link,
// measured) and, with print or screen, those not shown there.
func flattenSteps(in inputFile, v Values) ([]wire.Step, error) {
	return []wire.Step{{Argv: qpdfArgv("--generate-appearances", "--flatten-annotations="+v.String("annotations"),
		in.Path, wire.OutputDir+"/output.pdf")}}, nil
}

func pdfFlatten() *Renderer {
	return pdfRenderer("pdf-flatten",
		"Flatten a PDF's form fields and annotations into its pages with qpdf: each is drawn into the page as its appearance shows it (generated first for text fields and list boxes that have a value but no appearance) and removed, and the form goes with its last field. qpdf removes the annotations it cannot draw, those without an appearance (links, most often), too. Output: output.pdf.",
		[]Option{
			enumOpt("annotations", "Which annotations to flatten: all, print (those shown when printed) or screen (those not hidden on screen); qpdf drops the others.", "all", "all", "print", "screen"),
		}, flattenSteps)
}
