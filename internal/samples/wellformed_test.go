package samples

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"io"
	"testing"
)

// Every part of the generated office documents is well-formed XML.
func TestOfficeSamplesAreWellFormed(t *testing.T) {
	for name, doc := range map[string][]byte{"docx": DOCX("a"), "xlsx": XLSX("a"), "pptx": PPTX("a"), "odt": ODT("a"), "ods": ODS("a"), "odp": ODP("a")} {
		zr, err := zip.NewReader(bytes.NewReader(doc), int64(len(doc)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range zr.File {
			if f.Name == "mimetype" {
				continue
			}
			rc, _ := f.Open()
			dec := xml.NewDecoder(rc)
			for {
				_, err := dec.Token()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Errorf("%s %s: %v", name, f.Name, err)
					break
				}
			}
			rc.Close()
		}
	}
}
