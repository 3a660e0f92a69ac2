package samples

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
)

func escape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func zipOf(entries [][2]string, storedFirst bool) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i, e := range entries {
		method := zip.Deflate
		if storedFirst && i == 0 {
			method = zip.Store // ODF: "mimetype" first and uncompressed
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e[0], Method: method})
		if err != nil {
			panic(err)
		}
		if _, err := w.Write([]byte(e[1])); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// contentTypes is an OOXML [Content_Types].xml naming each part's type
// (part name, content type pairs).
func contentTypes(overrides ...string) [2]string {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
`)
	for i := 0; i+1 < len(overrides); i += 2 {
		fmt.Fprintf(&b, "<Override PartName=%q ContentType=%q/>\n", overrides[i], overrides[i+1])
	}
	b.WriteString("</Types>")
	return [2]string{"[Content_Types].xml", b.String()}
}

// relsTo is an OOXML relationships part at name with one relationship of
// type typ (the last path element of its URI) to target.
func relsTo(name, typ, target string) [2]string {
	return [2]string{name, `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/` + typ + `" Target="` + target + `"/>
</Relationships>`}
}

// DOCX returns a Word document with one paragraph per argument.
func DOCX(paragraphs ...string) []byte {
	var body bytes.Buffer
	for _, p := range paragraphs {
		fmt.Fprintf(&body, `<w:p><w:r><w:t>%s</w:t></w:r></w:p>`, escape(p))
	}
	return docx(body.String())
}

// DOCXInFont returns a Word document whose paragraphs are set in font
// at size points (its runs name it, as Word writes a document in Calibri).
func DOCXInFont(font string, size int, paragraphs ...string) []byte {
	var body bytes.Buffer
	for _, p := range paragraphs {
		fmt.Fprintf(&body, `<w:p><w:r><w:rPr><w:rFonts w:ascii="%[1]s" w:hAnsi="%[1]s" w:cs="%[1]s"/><w:sz w:val="%[2]d"/></w:rPr><w:t>%[3]s</w:t></w:r></w:p>`,
			escape(font), 2*size, escape(p))
	}
	return docx(body.String())
}

// docx returns a Word document whose body is the given WordprocessingML.
func docx(body string) []byte {
	return zipOf([][2]string{
		contentTypes("/word/document.xml", "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"),
		relsTo("_rels/.rels", "officeDocument", "word/document.xml"),
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body + `</w:body></w:document>`},
	}, false)
}

// XLSX returns a workbook with one sheet holding the given cells in column
// A, as inline strings.
func XLSX(cells ...string) []byte {
	var rows bytes.Buffer
	for i, c := range cells {
		fmt.Fprintf(&rows, `<row r="%d"><c r="A%d" t="inlineStr"><is><t>%s</t></is></c></row>`, i+1, i+1, escape(c))
	}
	return zipOf([][2]string{
		contentTypes("/xl/workbook.xml", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml",
			"/xl/worksheets/sheet1.xml", "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"),
		relsTo("_rels/.rels", "officeDocument", "xl/workbook.xml"),
		{"xl/workbook.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">
<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		relsTo("xl/_rels/workbook.xml.rels", "worksheet", "worksheets/sheet1.xml"),
		{"xl/worksheets/sheet1.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` + rows.String() + `</sheetData></worksheet>`},
	}, false)
}

// ODT returns an OpenDocument text with one paragraph per argument.
func ODT(paragraphs ...string) []byte {
	var body bytes.Buffer
	for _, p := range paragraphs {
		fmt.Fprintf(&body, `<text:p>%s</text:p>`, escape(p))
	}
	return odf("application/vnd.oasis.opendocument.text", `<office:text>`+body.String()+`</office:text>`)
}

// Image returns a w×h image, white with a red square of side s at (x, y).
func Image(w, h, x, y, s int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for j := 0; j < h; j++ {
		for i := 0; i < w; i++ {
			c := color.RGBA{255, 255, 255, 255}
			if i >= x && i < x+s && j >= y && j < y+s {
				c = color.RGBA{255, 0, 0, 255}
			}
			img.Set(i, j, c)
		}
	}
	return img
}

// PNGHeader returns just the signature and IHDR chunk of a w×h RGBA PNG:
// enough for a header reader, nothing to decode.
func PNGHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	chunk := append([]byte("IHDR"), ihdr...)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(ihdr)))
	b.Write(chunk)
	_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// WithEXIF inserts an APP1 EXIF segment carrying marker right after a
// JPEG's SOI marker.
func WithEXIF(jpeg []byte, marker string) []byte {
	payload := append([]byte("Exif\x00\x00"), marker...)
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(payload)+2))
	out := append([]byte{}, jpeg[:2]...)
	out = append(out, seg...)
	out = append(out, payload...)
	return append(out, jpeg[2:]...)
}

// ZipDirectory returns a ZIP of one empty stored entry whose central
// directory lists it entries times (names "0".."9" repeating, 47 bytes a
// record) and whose end record claims stated entries, in ZIP64 form when
// either count needs it. 900 000 entries make about 42 MB: the shape of a
// container that costs a reader memory without any compressed data.
func ZipDirectory(entries int, stated uint64) []byte {
	return ZipDirectoryShort(entries, stated, 0)
}

// ZipDirectoryShort is ZipDirectory whose end records state the directory's
// size short bytes smaller than it is (at least 0): a directory that runs on
// past its stated end, as archive/zip reads it.
func ZipDirectoryShort(entries int, stated, short uint64) []byte {
	le := binary.LittleEndian
	var b bytes.Buffer
	// One local header (30 bytes) and the name "0", no data.
	local := make([]byte, 30)
	le.PutUint32(local, 0x04034b50)
	le.PutUint16(local[4:], 20)
	le.PutUint16(local[26:], 1)
	b.Write(local)
	b.WriteByte('0')
	dirStart := b.Len()
	rec := make([]byte, 46)
	le.PutUint32(rec, 0x02014b50)
	le.PutUint16(rec[4:], 45)
	le.PutUint16(rec[6:], 20)
	le.PutUint16(rec[28:], 1)
	var block []byte // ten records, "0" to "9"
	for i := 0; i < 10; i++ {
		block = append(append(block, rec...), byte('0'+i))
	}
	b.Write(bytes.Repeat(block, entries/10))
	b.Write(block[:entries%10*47])
	dirSize, dirEnd := b.Len()-dirStart, b.Len()
	dirSize -= int(min(short, uint64(dirSize)))
	zip64 := entries > 0xfffe || stated > 0xfffe
	if zip64 {
		end64 := make([]byte, 56)
		le.PutUint32(end64, 0x06064b50)
		le.PutUint64(end64[4:], 44)
		le.PutUint16(end64[12:], 45)
		le.PutUint16(end64[14:], 45)
		le.PutUint64(end64[24:], stated)
		le.PutUint64(end64[32:], stated)
		le.PutUint64(end64[40:], uint64(dirSize))
		le.PutUint64(end64[48:], uint64(dirStart))
		b.Write(end64)
		loc := make([]byte, 20)
		le.PutUint32(loc, 0x07064b50)
		le.PutUint64(loc[8:], uint64(dirEnd))
		le.PutUint32(loc[16:], 1)
		b.Write(loc)
	}
	end := make([]byte, 22)
	le.PutUint32(end, 0x06054b50)
	n16 := uint16(stated)
	if zip64 {
		n16 = 0xffff
	}
	le.PutUint16(end[8:], n16)
	le.PutUint16(end[10:], n16)
	le.PutUint32(end[12:], uint32(dirSize))
	le.PutUint32(end[16:], uint32(dirStart))
	b.Write(end)
	return b.Bytes()
}

// FODTImage is a flat ODF text document (one XML file) with a paragraph
// and img (a PNG) drawn 2 inches wide.
func FODTImage(img []byte) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:body><office:text>
<text:p>A picture</text:p>
<text:p><draw:frame draw:name="Picture" svg:width="2in" svg:height="2in" text:anchor-type="as-char"><draw:image><office:binary-data>` +
		base64.StdEncoding.EncodeToString(img) + `</office:binary-data></draw:image></draw:frame></text:p>
</office:text></office:body></office:document>
`)
}

// Noise is a w×h image of random grey levels from seed: what JPEG
// compresses badly, so its quality shows in the bytes.
func Noise(w, h int, seed uint32) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	x := seed | 1
	for i := 0; i < len(img.Pix); i += 4 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		v := uint8(x)
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = v, v/2+64, 255-v, 255
	}
	return img
}

// FacturXML returns a minimal Cross Industry Invoice, as Factur-X's
// EN 16931 profile declares itself, with the given invoice number.
func FacturXML(number string) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<rsm:CrossIndustryInvoice xmlns:rsm="urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100" xmlns:ram="urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100" xmlns:udt="urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100">
<rsm:ExchangedDocumentContext><ram:GuidelineSpecifiedDocumentContextParameter><ram:ID>urn:cen.eu:en16931:2017</ram:ID></ram:GuidelineSpecifiedDocumentContextParameter></rsm:ExchangedDocumentContext>
<rsm:ExchangedDocument><ram:ID>` + escape(number) + `</ram:ID><ram:TypeCode>380</ram:TypeCode><ram:IssueDateTime><udt:DateTimeString format="102">20261206</udt:DateTimeString></ram:IssueDateTime></rsm:ExchangedDocument>
</rsm:CrossIndustryInvoice>
`)
}
