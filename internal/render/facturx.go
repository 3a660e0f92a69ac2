package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/renderbox/renderbox/internal/wire"
)

// factur-x: a Factur-X (ZUGFeRD 2) e-invoice: the invoice's PDF made
// PDF/A-3b with Ghostscript (as pdf-archive does), then its Cross
// Industry Invoice XML embedded as factur-x.xml and the XMP extended with
// the fx: properties and their PDF/A extension schema, by the rootfs's
// factur-x.py with pikepdf.

// facturXLevels maps the profile option to Factur-X's conformance level
// and the XML's relationship to the document (Factur-X 1.0: Data for the
// profiles whose XML does not carry the whole invoice, Alternative for
// those that do).
var facturXLevels = map[string][2]string{
	"minimum":  {"MINIMUM", "Data"},
	"basic-wl": {"BASIC WL", "Data"},
	"basic":    {"BASIC", "Alternative"},
	"en16931":  {"EN 16931", "Alternative"},
	"extended": {"EXTENDED", "Alternative"},
}

func init() {
	r := pdfRenderer("factur-x",
		"Make a Factur-X (ZUGFeRD 2) e-invoice: send the invoice's PDF, then its Cross Industry Invoice XML, as file parts in that order. The PDF becomes PDF/A-3b with Ghostscript (as pdf-archive makes it), the XML is embedded as factur-x.xml (text/xml, its relationship Data or Alternative by the profile, listed in /AF) and the XMP gains Factur-X's fx: properties and their PDF/A extension schema. An XML that is not well formed, has a DTD, or whose root is not a CrossIndustryInvoice fails the job. The XML is not checked against the profile's schema or rules. Output: output.pdf.",
		[]Option{
			enumOpt("profile", "The invoice's Factur-X profile, as its XML declares it.", "en16931", "minimum", "basic-wl", "basic", "en16931", "extended"),
		}, facturXSteps)
	r.Inputs, r.parts, r.partsOf = []string{TypeZIP}, true, facturXParts
	catalogue[r.Name] = resolve(r)
	outputRules[r.Name] = outputRule{re: regexp.MustCompile(`^output\.pdf$`)}
}

// facturXParts takes the invoice's PDF then its XML.
func facturXParts(input []byte) ([]string, error) {
	files, err := storedParts(input, "factur-x", 2, func(i int, name string, data []byte) error {
		switch {
		case i == 0 && !bytes.HasPrefix(data, []byte("%PDF-")):
			return fmt.Errorf("%w: the first file, %q, is the invoice and must be a PDF (a PDF begins %%PDF-)", ErrUnsupportedInput, name)
		case i == 1 && !bytes.HasPrefix(bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n"), []byte("<")):
			return fmt.Errorf("%w: the second file, %q, is the invoice's XML and must be XML", ErrUnsupportedInput, name)
		}
		return nil
	})
	if err == nil && len(files) != 2 {
		return nil, fmt.Errorf("%w: give the invoice's PDF and its XML, as two file parts in that order; got %d", ErrInvalidInput, len(files))
	}
	return files, err
}

func facturXSteps(in inputFile, v Values) ([]wire.Step, error) {
	if len(in.Files) != 2 {
		return nil, fmt.Errorf("%w: give the invoice's PDF and its XML, as two file parts in that order", ErrInvalidInput)
	}
	level := facturXLevels[v.String("profile")]
	data, err := json.Marshal(map[string]string{"level": level[0], "relationship": level[1]})
	if err != nil {
		return nil, err
	}
	pdfa, opts := wire.WorkDir+"/pdfa.pdf", wire.WorkDir+"/factur-x.json"
	steps := pdfaSteps(in.Site+"/"+in.Files[0], pdfa, "3")
	return append(steps,
		wire.Step{Argv: []string{"/usr/bin/printf", "%s", string(data)}, Stdout: opts},
		wire.Step{Argv: []string{"/usr/bin/python3", "-I", facturXScript, pdfa, in.Site + "/" + in.Files[1], opts, wire.OutputDir + "/output.pdf"}},
	), nil
}

// facturXScript is the rootfs's script that embeds the XML.
const facturXScript = "/usr/local/lib/renderbox/factur-x.py"
