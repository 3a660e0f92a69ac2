package render

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/renderbox/renderbox/internal/wire"
)

// Office formats beyond the OOXML and ODF packages sniff.go knows: OLE2
// compound files (the binary MS Office formats, and OOXML encrypted with a
// password, which is an OLE2 file around the encrypted package), flat ODF
// XML, and the ZIP packages that name their type in a first "mimetype"
// entry (ODF drawings and templates, StarOffice XML). Each is told from
// its bytes; the client's file name is never read.
const (
	TypeDOC  = "application/msword"
	TypeXLS  = "application/vnd.ms-excel"
	TypePPT  = "application/vnd.ms-powerpoint"
	TypeODG  = "application/vnd.oasis.opendocument.graphics"
	TypeOTT  = "application/vnd.oasis.opendocument.text-template"
	TypeOTS  = "application/vnd.oasis.opendocument.spreadsheet-template"
	TypeOTP  = "application/vnd.oasis.opendocument.presentation-template"
	TypeOTG  = "application/vnd.oasis.opendocument.graphics-template"
	TypeFODT = "application/vnd.oasis.opendocument.text-flat-xml"
	TypeFODS = "application/vnd.oasis.opendocument.spreadsheet-flat-xml"
	TypeFODP = "application/vnd.oasis.opendocument.presentation-flat-xml"
	TypeFODG = "application/vnd.oasis.opendocument.graphics-flat-xml"
	TypeSXW  = "application/vnd.sun.xml.writer"
	TypeSXC  = "application/vnd.sun.xml.calc"
	TypeSXI  = "application/vnd.sun.xml.impress"
	TypeSXD  = "application/vnd.sun.xml.draw"
	// TypeOOXMLEncrypted is a password-protected OOXML document (Word,
	// Excel or PowerPoint: which one is inside the encryption). No
	// registered media type names it.
	TypeOOXMLEncrypted = "application/x-ooxml-encrypted"
	// TypeOLE is an OLE2 compound file of no kind office-pdf converts.
	TypeOLE = "application/x-ole-storage"
)

// officeInputs are the types office-pdf accepts.
var officeInputs = []string{
	TypeDOCX, TypeXLSX, TypePPTX, TypeODT, TypeODS, TypeODP, TypeRTF,
	TypeDOC, TypeXLS, TypePPT, TypeOOXMLEncrypted, TypeODG, TypeOTT, TypeOTS, TypeOTP, TypeOTG,
	TypeFODT, TypeFODS, TypeFODP, TypeFODG, TypeSXW, TypeSXC, TypeSXI, TypeSXD,
	// Text is sniffed; CSV only declared by the client (its bytes are text).
	TypeText, TypeCSV,
}

// officeSchema are office-pdf's options: Gotenberg's LibreOffice route's
// that LibreOffice's PDF export and loading take.
var officeSchema = []Option{
	boolOpt("landscape", "Turn every page landscape: the page styles of documents and spreadsheets, the slides and pages of presentations and drawings.", false),
	patternOpt("page_ranges", "Pages to export, e.g. \"1-3,5\"; all when absent; with several documents, of each one converted.", pageRangesPattern),
	secretOpt(patternOpt("password", "Opens a password-protected document. A secret: it is not stored with the job, logged or shown back (the job's options read \""+Redacted+"\").", `[^\x00]{1,256}`), "1–256 characters, no NUL"),
	intOpt("quality", "JPEG quality of the PDF's images, 1–100.", 90, 1, 100),
	{Name: "max_image_resolution", Type: "integer", Minimum: num(72), Maximum: num(1200),
		Description: "Reduce images to at most this many dots per inch; absent, images keep their resolution."},
	boolOpt("single_page_sheets", "Put each spreadsheet sheet on one page, however large.", false),
	boolOpt("export_form_fields", "Export form fields as PDF form fields; false prints their content.", true),
	{Name: "pdf_a", Type: "string", Enum: []string{"1b", "2b", "3b"},
		Description: "Export PDF/A of this part as LibreOffice's export makes it: 1b (PDF 1.4, no transparency; LibreOffice writes PDF/A-1a, tagged, which meets 1b too), 2b or 3b (3b allows embedded files of any kind; see pdf-attach); absent, a plain PDF. Fonts are embedded and the output intent is sRGB; the XMP names the part."},
	boolOpt("bookmarks", "With several documents, one bookmark per document on its first page, titled by its file name without its extension.", false),
	titlesOpt,
	boolOpt("pdf_ua", "Export PDF/UA-1 (accessible PDF: tagged, with the document's title shown, its XMP naming the part) as LibreOffice's export makes it; it does not fix a document whose images lack alternative text.", false),
}

// maxOfficeDocs bounds the documents one office-pdf job converts.
const maxOfficeDocs = 20

// officeParts reads a ZIP of several documents: each a stored entry that
// office-pdf converts, or a PDF, told from its bytes like a single input.
func officeParts(input []byte) (files, types []string, err error) {
	files, err = storedParts(input, "office-pdf", maxOfficeDocs, func(_ int, name string, data []byte) error {
		t, err := sniff(data)
		if err != nil {
			return fmt.Errorf("file %q: %w", name, err)
		}
		if t != TypePDF && (t == TypeCSV || !slices.Contains(officeInputs, t)) {
			return fmt.Errorf("%w: file %q looks like %s; office-pdf converts office documents and takes PDFs as they are", ErrUnsupportedInput, name, t)
		}
		types = append(types, t)
		return nil
	})
	if err == nil && len(files) == 0 {
		return nil, nil, fmt.Errorf("%w: the archive holds no document", ErrInvalidInput)
	}
	return files, types, err
}

// officeMerge converts several documents (or one, for its bookmark) with
// one LibreOffice and merges their PDFs in order, bookmarked when v asks.
// PDF/A and PDF/UA are refused: a merge keeps neither (pdf-archive makes
// PDF/A of the merged document).
func officeMerge(in inputFile, v Values) (wire.Request, error) {
	if v.Has("pdf_a") || v.Bool("pdf_ua") {
		return wire.Request{}, fmt.Errorf("%w: pdf_a and pdf_ua are for one document without bookmarks: a merge keeps neither (run pdf-archive on the merged PDF, e.g. the chain office-pdf|pdf-archive)", ErrInvalidOptions)
	}
	paths, types, names := []string{in.Path}, []string{in.Type}, []string{cmp.Or(in.Name, "document")}
	if len(in.Files) > 0 {
		paths, types, names = nil, in.Types, in.Files
		for _, f := range in.Files {
			paths = append(paths, in.Site+"/"+f)
		}
	}
	dir := wire.WorkDir + "/parts"
	o := &wire.Office{OutDir: dir, Format: wire.OfficePDF, Options: officeOptions(in, v)}
	var pdfs []string
	for i, p := range paths {
		o.Parts = append(o.Parts, wire.OfficePart{Path: p, Convert: types[i] != TypePDF})
		o.Options.Encrypted = o.Options.Encrypted || types[i] == TypeOOXMLEncrypted
		pdfs = append(pdfs, fmt.Sprintf("%s/part-%d.pdf", dir, i+1))
	}
	after, err := mergeInto(pdfs, names, v)
	return wire.Request{Env: officeEnv, Office: o, After: after}, err
}

// officeOptions are the validated options as the agent takes them.
func officeOptions(in inputFile, v Values) *wire.OfficeOptions {
	return &wire.OfficeOptions{
		Password: v.String("password"), Encrypted: in.Type == TypeOOXMLEncrypted,
		Landscape: v.Bool("landscape"), PageRange: v.String("page_ranges"),
		Quality: v.Int("quality"), MaxImageResolution: v.Int("max_image_resolution"),
		SinglePageSheets: v.Bool("single_page_sheets"), ExportFormFields: v.Bool("export_form_fields"),
		PDFUA: v.Bool("pdf_ua"), PDFA: strings.TrimSuffix(v.String("pdf_a"), "b"),
	}
}

// mimetypeFirst are the types of ZIP packages whose first entry is an
// uncompressed "mimetype" holding the type (ODF 1.2 part 3, 3.3; the
// StarOffice XML formats did the same), the longer ones first where one is
// a prefix of another.
var mimetypeFirst = []string{
	TypeOTT, TypeOTS, TypeOTP, TypeOTG, TypeODT, TypeODS, TypeODP, TypeODG,
	TypeSXW, TypeSXC, TypeSXI, TypeSXD,
}

// sniffOffice returns the type of an OLE2 compound file or a flat ODF
// document, or "" when input is neither. head is input's first bytes.
func sniffOffice(input, head []byte) string {
	switch {
	case bytes.HasPrefix(head, oleMagic):
		return sniffOLE(input)
	case bytes.Contains(head, []byte(odfOfficeNS)):
		return sniffFlatODF(head)
	}
	return ""
}

// Flat ODF: one XML document whose root is office:document, its type in
// office:mimetype (ODF 1.2 part 1, 3.1.4 and 19.385).
const odfOfficeNS = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"

var flatODF = map[string]string{
	TypeODT: TypeFODT, TypeODS: TypeFODS, TypeODP: TypeFODP, TypeODG: TypeFODG,
}

// sniffFlatODF reads head's prolog and root start tag with encoding/xml
// (no entity is expanded, the tag must end within head) and returns the
// flat ODF type it names, or "".
func sniffFlatODF(head []byte) string {
	d := xml.NewDecoder(bytes.NewReader(head))
	for {
		tok, err := d.RawToken()
		if err != nil {
			return ""
		}
		switch tok := tok.(type) {
		case xml.ProcInst, xml.Comment, xml.Directive:
			continue
		case xml.CharData:
			if len(bytes.TrimSpace(tok)) == 0 {
				continue
			}
			return ""
		case xml.StartElement:
			// RawToken leaves prefixes unresolved: find the prefix bound
			// to the office namespace on the root itself.
			prefix := ""
			for _, a := range tok.Attr {
				if a.Name.Space == "xmlns" && a.Value == odfOfficeNS {
					prefix = a.Name.Local
				}
			}
			if prefix == "" || tok.Name.Space != prefix || tok.Name.Local != "document" {
				return ""
			}
			for _, a := range tok.Attr {
				if a.Name.Space == prefix && a.Name.Local == "mimetype" {
					return flatODF[a.Value]
				}
			}
			return ""
		default:
			return ""
		}
	}
}

// OLE2 compound files ([MS-CFB]).
var oleMagic = []byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1}

const (
	oleHeaderLen    = 512
	oleHeaderDIFAT  = 109 // FAT sector numbers in the header
	oleEntryLen     = 128
	oleMaxRegSector = 0xfffffffa // MAXREGSECT: larger numbers are markers
	oleEndOfChain   = 0xfffffffe
	oleNoStream     = 0xffffffff
	oleStorage      = 1
	oleStream       = 2
	oleRoot         = 5
	// MaxOLEEntries bounds the directory entries read: a document's root
	// holds a handful of streams, and the directory comes before the
	// rest in the files Office and LibreOffice write.
	MaxOLEEntries = 4096
)

var errNotOLE = errors.New("not a readable OLE2 compound file")

// oleRoots are the root-level entries that tell the formats apart
// ([MS-DOC] 2.1, [MS-XLS] 2.1.2, [MS-PPT] 2.1.1, [MS-OFFCRYPTO] 2.3.4.4).
var oleRoots = []struct {
	names []string // all of them must be present
	typ   string
}{
	{[]string{"EncryptionInfo", "EncryptedPackage"}, TypeOOXMLEncrypted},
	{[]string{"WordDocument"}, TypeDOC},
	{[]string{"Workbook"}, TypeXLS},
	{[]string{"Book"}, TypeXLS}, // Excel 5 and 95
	{[]string{"PowerPoint Document"}, TypePPT},
}

// sniffOLE tells the OLE2 formats apart by the names of the root storage's
// children (an embedded object's streams sit deeper and do not count).
func sniffOLE(input []byte) string {
	names, err := oleRootNames(input)
	if err != nil {
		return TypeOLE
	}
	has := func(n string) bool {
		for _, m := range names {
			if strings.EqualFold(m, n) { // [MS-CFB] 2.6.4 compares names case-insensitively
				return true
			}
		}
		return false
	}
	for _, r := range oleRoots {
		all := true
		for _, n := range r.names {
			all = all && has(n)
		}
		if all {
			return r.typ
		}
	}
	return TypeOLE
}

// ole is a compound file's header fields, read from its bytes in place.
type ole struct {
	b       []byte
	shift   uint   // sector size is 1<<shift: 512 or 4096
	sectors uint32 // whole sectors after the header
}

func (f *ole) sector(n uint32) ([]byte, bool) {
	if n >= f.sectors {
		return nil, false
	}
	off := (uint64(n) + 1) << f.shift
	return f.b[off : off+1<<f.shift], true
}

// fatSector returns the sector number of the i-th FAT sector: from the
// header for the first 109, else by walking the DIFAT chain, at most as
// many steps as the file has sectors for.
func (f *ole) fatSector(i uint32) (uint32, bool) {
	le := binary.LittleEndian
	if i < oleHeaderDIFAT {
		return le.Uint32(f.b[0x4c+4*i:]), true
	}
	i -= oleHeaderDIFAT
	per := uint32(1<<f.shift)/4 - 1 // the last field points at the next DIFAT sector
	next := le.Uint32(f.b[0x44:])
	for hop := uint32(0); ; hop++ {
		s, ok := f.sector(next)
		if !ok || hop >= f.sectors {
			return 0, false
		}
		if i < per {
			return le.Uint32(s[4*i:]), true
		}
		i -= per
		next = le.Uint32(s[4*per:])
	}
}

// next returns the sector after n in its chain, from the FAT.
func (f *ole) next(n uint32) (uint32, bool) {
	if n >= f.sectors {
		return 0, false // also bounds the DIFAT walk below
	}
	per := uint32(1<<f.shift) / 4
	fs, ok := f.fatSector(n / per)
	if !ok {
		return 0, false
	}
	s, ok := f.sector(fs)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint32(s[4*(n%per):]), true
}

// oleRootNames returns the names of the root storage's children in an OLE2
// compound file. It reads the header, follows the directory's sector chain
// for at most MaxOLEEntries entries (a chain that loops only reaches the
// cap), and walks the root's child tree visiting each entry at most once.
// It never reads outside b.
func oleRootNames(b []byte) ([]string, error) {
	le := binary.LittleEndian
	if len(b) < oleHeaderLen || !bytes.HasPrefix(b, oleMagic) || le.Uint16(b[0x1c:]) != 0xfffe {
		return nil, errNotOLE
	}
	f := &ole{b: b, shift: uint(le.Uint16(b[0x1e:]))}
	if (f.shift != 9 && f.shift != 12) || len(b) < 2<<f.shift {
		return nil, errNotOLE
	}
	f.sectors = uint32(min(uint64(len(b)>>f.shift), oleMaxRegSector)) - 1 // the header takes the first
	// The directory's entries, at most MaxOLEEntries of them.
	var dir []byte
	for n := le.Uint32(b[0x30:]); n != oleEndOfChain && len(dir) < MaxOLEEntries*oleEntryLen; {
		s, ok := f.sector(n)
		if !ok {
			return nil, errNotOLE
		}
		dir = append(dir, s[:min(len(s), (MaxOLEEntries-len(dir)/oleEntryLen)*oleEntryLen)]...)
		if n, ok = f.next(n); !ok {
			return nil, errNotOLE
		}
	}
	entries := len(dir) / oleEntryLen
	if entries == 0 || dir[0x42] != oleRoot {
		return nil, errNotOLE
	}
	var names []string
	seen := make([]bool, entries)
	stack := []uint32{le.Uint32(dir[0x4c:])} // the root's child: a tree of siblings
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id == oleNoStream || id >= uint32(entries) || seen[id] {
			continue
		}
		seen[id] = true
		e := dir[int(id)*oleEntryLen:][:oleEntryLen]
		if t := e[0x42]; t == oleStorage || t == oleStream {
			names = append(names, oleName(e))
		}
		stack = append(stack, le.Uint32(e[0x44:]), le.Uint32(e[0x48:])) // left and right siblings
	}
	return names, nil
}

// oleName decodes an entry's UTF-16 name (at most 31 characters and a NUL).
func oleName(e []byte) string {
	n := int(binary.LittleEndian.Uint16(e[0x40:]))
	if n < 2 || n > 64 {
		return ""
	}
	u := make([]uint16, n/2-1)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(e[2*i:])
	}
	return string(utf16.Decode(u))
}
