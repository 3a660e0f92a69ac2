package render

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
)

// Office formats are told apart by their bytes: OLE2 files by the names
// directly under their root (not by an embedded object's), flat ODF by
// its root element, ZIP packages by their first "mimetype" entry.
func TestSniffOffice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"doc", samples.OLE("\x01CompObj", "WordDocument", "1Table"), TypeDOC},
		{"xls", samples.OLE("Workbook", "\x05SummaryInformation"), TypeXLS},
		{"xls 95", samples.OLE("Book"), TypeXLS},
		{"ppt", samples.OLE("Current User", "PowerPoint Document", "Pictures"), TypePPT},
		{"encrypted ooxml", samples.OLE("\x06DataSpaces/Version", "EncryptionInfo", "EncryptedPackage"), TypeOOXMLEncrypted},
		{"names compare without case", samples.OLE("WORDDOCUMENT"), TypeDOC},
		{"doc with an embedded workbook", samples.OLE("ObjectPool/Workbook", "WordDocument"), TypeDOC},
		{"an embedded workbook alone", samples.OLE("ObjectPool/Workbook"), TypeOLE},
		{"only half of the encryption", samples.OLE("EncryptionInfo"), TypeOLE},
		{"msi-like", samples.OLE("\x05DigitalSignature"), TypeOLE},
		{"ole magic only", append([]byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1}, make([]byte, 600)...), TypeOLE},
		{"odg", samples.ODG("x"), TypeODG},
		{"ott", samples.OTT("x"), TypeOTT},
		{"sxw", samples.SXW("x"), TypeSXW},
		{"fodt", samples.FODT("x"), TypeFODT},
		{"fods", bytes.Replace(samples.FODT("x"), []byte("opendocument.text"), []byte("opendocument.spreadsheet"), 1), TypeFODS},
		{"flat odf with another prefix", []byte(`<o:document xmlns:o="urn:oasis:names:tc:opendocument:xmlns:office:1.0" o:mimetype="application/vnd.oasis.opendocument.graphics"/>`), TypeFODG},
		{"office:document in another namespace", []byte(`<?xml version="1.0"?><office:document xmlns:office="urn:example" office:mimetype="application/vnd.oasis.opendocument.text"/>`), "text/xml"},
		{"office:document not at the root", []byte(`<?xml version="1.0"?><r><office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" office:mimetype="application/vnd.oasis.opendocument.text"/></r>`), "text/xml"},
		{"prose naming office:document", []byte("see <office:document> in the spec"), TypeText},
		{"docm is a docx", samples.DOCX("x"), TypeDOCX},
	} {
		if got := Sniff(tc.in); got != tc.want {
			t.Errorf("%s: Sniff = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// oleWithDirLoop is an OLE2 file whose directory chain loops on itself
// and whose root's child tree points back at itself.
func oleWithDirLoop() []byte {
	b := samples.OLE("WordDocument")
	le := binary.LittleEndian
	le.PutUint32(b[512+4:], 1)         // FAT: directory sector 1 → 1
	le.PutUint32(b[1024+128+0x48:], 1) // the child's right sibling is itself
	return b
}

// A directory chain that loops, and one of sectors past the file, are
// read within the bounds: the loop stops at MaxOLEEntries, quickly.
func TestOLEDirectoryIsBounded(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if got := Sniff(oleWithDirLoop()); got != TypeDOC {
		t.Errorf("a looping directory chain: Sniff = %q, want %q (the entries read before the cap)", got, TypeDOC)
	}
	b := samples.OLE("WordDocument")
	binary.LittleEndian.PutUint32(b[0x30:], 1<<20) // the directory starts past the end
	if got := Sniff(b); got != TypeOLE {
		t.Errorf("a directory past the end: Sniff = %q, want %q", got, TypeOLE)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v", took)
	}
}

// The OLE2 reader reads only inside its input, stops within its bounds
// and finds only names that are in the input.
func FuzzOLE(f *testing.F) {
	for _, s := range [][]byte{
		samples.OLE("WordDocument"), samples.OLE("ObjectPool/Workbook", "PowerPoint Document"),
		samples.OLE("EncryptionInfo", "EncryptedPackage"), oleWithDirLoop(),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		names, err := oleRootNames(in)
		if err != nil {
			return
		}
		if len(names) > MaxOLEEntries {
			t.Fatalf("%d names from at most %d entries", len(names), MaxOLEEntries)
		}
		if got := sniffOLE(in); got == "" {
			t.Fatalf("sniffOLE = %q", got)
		}
	})
}

// A document's password reaches the sandbox and nothing else: the options
// as recorded read Redacted, and a refused password is not quoted.
func TestOfficePasswordIsSecret(t *testing.T) {
	t.Parallel()
	r, _ := Lookup("office-pdf")
	p, err := r.Prepare(samples.DOCX("a"), map[string]any{"password": "hunter2", "landscape": true}, LimitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Job.Request.Office.Options.Password; got != "hunter2" {
		t.Errorf("the sandbox gets password %q, want the one given", got)
	}
	rec := r.Recorded(p.Options)
	if rec.String("password") != Redacted || !rec.Bool("landscape") || p.Options.String("password") != "hunter2" {
		t.Errorf("recorded %v from %v; want the password redacted, the rest kept, the plan's untouched", rec, p.Options)
	}
	if _, ok := r.Recorded(Values{"quality": 90})["password"]; ok {
		t.Errorf("a password that was not given is recorded")
	}
	_, err = r.Prepare(samples.DOCX("a"), map[string]any{"password": "bad\x00hunter2"}, LimitRequest{})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a password with a NUL: %v; want it refused without being quoted", err)
	}
}
