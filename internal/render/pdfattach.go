package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"

	"github.com/renderbox/renderbox/internal/wire"
)

// pdf-attach: files embedded in a PDF, each with its MIME type and its
// relationship to the document (/AFRelationship, listed in /AF as PDF/A-3
// wants), by the rootfs's pdf-attach.py with pikepdf.

func init() {
	r := pdfRenderer("pdf-attach",
		fmt.Sprintf("Embed files in a PDF with pikepdf: send the PDF, then the files to embed (at most %d), as file parts in that order. Each is embedded under its file name with its MIME type (by its extension; application/octet-stream when unknown) and the relationship given, and listed in the document's /AF (as PDF/A-3 wants; the document is not converted: run pdf-archive with 3b first for PDF/A-3). Output: output.pdf.", maxAttachments),
		[]Option{
			enumOpt("relationship", "How the files relate to the document (PDF 2.0 /AFRelationship): Source (what it was made from), Data (the data it shows, e.g. an invoice's XML), Alternative (another form of it), Supplement, or Unspecified.", "Unspecified", "Source", "Data", "Alternative", "Supplement", "Unspecified"),
			textOpt("description", "A description of the files, shown by viewers.", maxTitle),
		}, attachSteps)
	r.Inputs, r.parts, r.partsOf = []string{TypeZIP}, true, attachParts
	catalogue[r.Name] = resolve(r)
	outputRules[r.Name] = outputRule{re: regexp.MustCompile(`^output\.pdf$`)}
}

// maxAttachments bounds the files one job embeds.
const maxAttachments = 20

// attachParts takes the document, a PDF, then the files to embed, each
// name once.
func attachParts(input []byte) ([]string, error) {
	names := map[string]bool{}
	files, err := storedParts(input, "pdf-attach", maxAttachments+1, func(i int, name string, data []byte) error {
		if i == 0 && !bytes.HasPrefix(data, []byte("%PDF-")) {
			return fmt.Errorf("%w: the first file, %q, is the document and must be a PDF (a PDF begins %%PDF-)", ErrUnsupportedInput, name)
		}
		if base := path.Base(name); i > 0 && names[base] {
			return fmt.Errorf("%w: two files to embed are named %q; each name once", ErrInvalidInput, base)
		} else {
			names[base] = true
		}
		return nil
	})
	if err == nil && len(files) < 2 {
		return nil, fmt.Errorf("%w: give the PDF and at least one file to embed, as file parts in that order", ErrInvalidInput)
	}
	return files, err
}

func attachSteps(in inputFile, v Values) ([]wire.Step, error) {
	if len(in.Files) < 2 {
		return nil, fmt.Errorf("%w: give the PDF and at least one file to embed, as file parts in that order", ErrInvalidInput)
	}
	type file struct {
		Path string `json:"path"`
		Name string `json:"name"`
	}
	var files []file
	for _, f := range in.Files[1:] {
		files = append(files, file{Path: in.Site + "/" + f, Name: path.Base(f)})
	}
	data, err := json.Marshal(map[string]any{"files": files, "relationship": v.String("relationship"), "description": v.String("description")})
	if err != nil {
		return nil, err
	}
	opts := wire.WorkDir + "/attach.json"
	return []wire.Step{
		{Argv: []string{"/usr/bin/printf", "%s", string(data)}, Stdout: opts},
		{Argv: []string{"/usr/bin/python3", "-I", pdfAttachScript, in.Site + "/" + in.Files[0], opts, wire.OutputDir + "/output.pdf"}},
	}, nil
}

// pdfAttachScript is the rootfs's script that embeds the files.
const pdfAttachScript = "/usr/local/lib/renderbox/pdf-attach.py"
