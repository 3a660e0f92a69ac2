package samples

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
)

// More office formats, for office-pdf's breadth: what LibreOffice reads
// beyond DOCX/XLSX/PPTX/ODF, and documents shaped for its options.

func textParagraphs(paragraphs []string) string {
	var body bytes.Buffer
	for _, p := range paragraphs {
		fmt.Fprintf(&body, `<text:p>%s</text:p>`, escape(p))
	}
	return body.String()
}

// OTT returns an OpenDocument text template with one paragraph per argument.
func OTT(paragraphs ...string) []byte {
	return odf("application/vnd.oasis.opendocument.text-template", `<office:text>`+textParagraphs(paragraphs)+`</office:text>`)
}

// ODG returns an OpenDocument drawing: one page with a text box holding text.
func ODG(text string) []byte {
	return odf("application/vnd.oasis.opendocument.graphics",
		`<office:drawing><draw:page draw:name="page1"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="12cm" svg:height="3cm">`+
			`<draw:text-box><text:p>`+escape(text)+`</text:p></draw:text-box></draw:frame></draw:page></office:drawing>`)
}

// FODT returns a flat OpenDocument text: one XML file, no ZIP.
func FODT(paragraphs ...string) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2"
 office:mimetype="application/vnd.oasis.opendocument.text">
<office:body><office:text>` + textParagraphs(paragraphs) + `</office:text></office:body></office:document>`)
}

// SXW returns a StarOffice/OpenOffice.org 1.x Writer document.
func SXW(paragraphs ...string) []byte {
	mt := "application/vnd.sun.xml.writer"
	return zipOf([][2]string{
		{"mimetype", mt},
		{"META-INF/manifest.xml", `<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="http://openoffice.org/2001/manifest">
<manifest:file-entry manifest:media-type="` + mt + `" manifest:full-path="/"/>
<manifest:file-entry manifest:media-type="text/xml" manifest:full-path="content.xml"/>
</manifest:manifest>`},
		{"content.xml", `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="http://openoffice.org/2000/office" xmlns:text="http://openoffice.org/2000/text" office:class="text" office:version="1.0">
<office:body>` + textParagraphs(paragraphs) + `</office:body></office:document-content>`},
	}, true)
}

// DOCXPages returns a Word document with each argument on a page of its own.
func DOCXPages(pages ...string) []byte {
	var body bytes.Buffer
	for i, p := range pages {
		if i > 0 {
			body.WriteString(`<w:p><w:r><w:br w:type="page"/></w:r></w:p>`)
		}
		fmt.Fprintf(&body, `<w:p><w:r><w:t>%s</w:t></w:r></w:p>`, escape(p))
	}
	return docx(body.String())
}

// XLSXSheets returns a workbook with one sheet per name, each rows × cols
// cells reading "<name> r<row>c<col>": enough of them and the sheet spans
// several pages.
func XLSXSheets(rows, cols int, names ...string) []byte {
	ct := []string{"/xl/workbook.xml", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"}
	var sheets, rels strings.Builder
	var parts [][2]string
	for i, n := range names {
		ct = append(ct, fmt.Sprintf("/xl/worksheets/sheet%d.xml", i+1), "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml")
		fmt.Fprintf(&sheets, `<sheet name="%s" sheetId="%d" r:id="rId%d"/>`, escape(n), i+1, i+1)
		fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet%d.xml"/>`, i+1, i+1)
		var data strings.Builder
		for r := 1; r <= rows; r++ {
			fmt.Fprintf(&data, `<row r="%d">`, r)
			for c := 0; c < cols; c++ {
				fmt.Fprintf(&data, `<c r="%c%d" t="inlineStr"><is><t>%s r%dc%d</t></is></c>`, 'A'+c, r, escape(n), r, c+1)
			}
			data.WriteString(`</row>`)
		}
		parts = append(parts, [2]string{fmt.Sprintf("xl/worksheets/sheet%d.xml", i+1), `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` + data.String() + `</sheetData></worksheet>`})
	}
	return zipOf(append([][2]string{
		contentTypes(ct...),
		relsTo("_rels/.rels", "officeDocument", "xl/workbook.xml"),
		{"xl/workbook.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">
<sheets>` + sheets.String() + `</sheets></workbook>`},
		{"xl/_rels/workbook.xml.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` + rels.String() + `</Relationships>`},
	}, parts...), false)
}

// OLE returns an OLE2 compound file ([MS-CFB], version 3) whose directory
// holds the named entries, all empty streams; "A/B" is a stream B inside a
// storage A under the root. It carries no document: it is for sniffing.
func OLE(names ...string) []byte {
	type entry struct {
		name               string
		typ                byte
		left, right, child uint32
	}
	const none = 0xffffffff
	ents := []entry{{name: "Root Entry", typ: 5, left: none, right: none, child: none}}
	storages := map[string]int{}
	// link appends e under parent as the right sibling of its last child.
	link := func(parent int, e entry) int {
		e.left, e.right, e.child = none, none, none
		ents = append(ents, e)
		id := len(ents) - 1
		if ents[parent].child == none {
			ents[parent].child = uint32(id)
		} else {
			last := int(ents[parent].child)
			for ents[last].right != none {
				last = int(ents[last].right)
			}
			ents[last].right = uint32(id)
		}
		return id
	}
	for _, n := range names {
		parent := 0
		if dir, leaf, ok := strings.Cut(n, "/"); ok {
			s, seen := storages[dir]
			if !seen {
				s = link(0, entry{name: dir, typ: 1})
				storages[dir] = s
			}
			parent, n = s, leaf
		}
		link(parent, entry{name: n, typ: 2})
	}
	const ss = 512
	dirSectors := (len(ents)*128 + ss - 1) / ss
	le := binary.LittleEndian
	out := make([]byte, ss*(2+dirSectors)) // header, one FAT sector, the directory
	h := out[:ss]
	copy(h, []byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1})
	le.PutUint16(h[0x18:], 0x3e)
	le.PutUint16(h[0x1a:], 3)
	le.PutUint16(h[0x1c:], 0xfffe)
	le.PutUint16(h[0x1e:], 9)
	le.PutUint16(h[0x20:], 6)
	le.PutUint32(h[0x2c:], 1) // FAT sectors
	le.PutUint32(h[0x30:], 1) // first directory sector
	le.PutUint32(h[0x38:], 4096)
	le.PutUint32(h[0x3c:], 0xfffffffe)
	le.PutUint32(h[0x44:], 0xfffffffe)
	for i := 0; i < 109; i++ {
		le.PutUint32(h[0x4c+4*i:], none)
	}
	le.PutUint32(h[0x4c:], 0) // the FAT is sector 0
	fat := out[ss : 2*ss]
	for i := 0; i < ss/4; i++ {
		le.PutUint32(fat[4*i:], none)
	}
	le.PutUint32(fat, 0xfffffffd) // FATSECT
	for i := 1; i <= dirSectors; i++ {
		next := uint32(i + 1)
		if i == dirSectors {
			next = 0xfffffffe
		}
		le.PutUint32(fat[4*i:], next)
	}
	dir := out[2*ss:]
	for i, e := range ents {
		d := dir[128*i : 128*(i+1)]
		u := utf16.Encode([]rune(e.name))
		for j, c := range u {
			le.PutUint16(d[2*j:], c)
		}
		le.PutUint16(d[0x40:], uint16(2*len(u)+2))
		d[0x42], d[0x43] = e.typ, 1 // black
		le.PutUint32(d[0x44:], e.left)
		le.PutUint32(d[0x48:], e.right)
		le.PutUint32(d[0x4c:], e.child)
		le.PutUint32(d[0x74:], 0xfffffffe) // no data
	}
	for i := len(ents); i < dirSectors*ss/128; i++ {
		d := dir[128*i : 128*(i+1)]
		le.PutUint32(d[0x44:], none)
		le.PutUint32(d[0x48:], none)
		le.PutUint32(d[0x4c:], none)
	}
	return out
}
