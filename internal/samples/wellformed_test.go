package samples

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"io"
	"strings"
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

// The served benchmark's page has a heading, CSS, a header row and rows
// rows.
func TestHTMLTableHasItsRows(t *testing.T) {
	doc := string(HTMLTable(30))
	if got := strings.Count(doc, "<tr>"); got != 31 {
		t.Errorf("got %d <tr>, want 31 (a header and 30 rows)", got)
	}
	for _, want := range []string{"<h1>", "<style>", "</table>"} {
		if !strings.Contains(doc, want) {
			t.Errorf("missing %q", want)
		}
	}
}
