package samples

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
)

// PPTX returns a one-slide presentation with title as its only text.
func PPTX(title string) []byte {
	const rels = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	return zipOf([][2]string{
		contentTypes("/ppt/presentation.xml", "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml",
			"/ppt/slides/slide1.xml", "application/vnd.openxmlformats-officedocument.presentationml.slide+xml"),
		relsTo("_rels/.rels", "officeDocument", "ppt/presentation.xml"),
		{"ppt/presentation.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:presentation xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:r="` + rels + `">
<p:sldIdLst><p:sldId id="256" r:id="rId1"/></p:sldIdLst><p:sldSz cx="9144000" cy="6858000"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>`},
		relsTo("ppt/_rels/presentation.xml.rels", "slide", "slides/slide1.xml"),
		{"ppt/slides/slide1.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">
<p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>
<p:sp><p:nvSpPr><p:cNvPr id="2" name="Title"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr>
<p:spPr><a:xfrm><a:off x="457200" y="457200"/><a:ext cx="8229600" cy="1143000"/></a:xfrm></p:spPr>
<p:txBody><a:bodyPr/><a:p><a:r><a:t>` + escape(title) + `</a:t></a:r></a:p></p:txBody></p:sp>
</p:spTree></p:cSld></p:sld>`},
	}, false)
}

// odf returns an OpenDocument of media type mt whose office:body holds body.
func odf(mt, body string) []byte {
	return zipOf([][2]string{
		{"mimetype", mt},
		{"META-INF/manifest.xml", `<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">
<manifest:file-entry manifest:full-path="/" manifest:media-type="` + mt + `"/>
<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>`},
		{"content.xml", `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2">
<office:body>` + body + `</office:body></office:document-content>`},
	}, true)
}

// ODS returns an OpenDocument spreadsheet with the cells in column A.
func ODS(cells ...string) []byte {
	var rows bytes.Buffer
	for _, c := range cells {
		fmt.Fprintf(&rows, `<table:table-row><table:table-cell office:value-type="string"><text:p>%s</text:p></table:table-cell></table:table-row>`, escape(c))
	}
	return odf("application/vnd.oasis.opendocument.spreadsheet",
		`<office:spreadsheet><table:table table:name="Sheet1">`+rows.String()+`</table:table></office:spreadsheet>`)
}

// ODP returns a one-page OpenDocument presentation showing title.
func ODP(title string) []byte {
	return odf("application/vnd.oasis.opendocument.presentation",
		`<office:presentation><draw:page draw:name="page1"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="3cm">`+
			`<draw:text-box><text:p>`+escape(title)+`</text:p></draw:text-box></draw:frame></draw:page></office:presentation>`)
}

// TIFF returns an uncompressed baseline RGB TIFF of img (little-endian,
// one strip): the simplest file every TIFF reader takes.
func TIFF(img image.Image) []byte {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	pix := make([]byte, 0, w*h*3)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			pix = append(pix, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	type entry struct {
		tag, typ uint16
		count    uint32
		value    uint32
	}
	const short, long = 3, 4
	const entries = 10
	ifd := uint32(8)
	bps := ifd + 2 + entries*12 + 4 // three SHORTs of BitsPerSample
	data := bps + 6
	es := []entry{
		{256, long, 1, uint32(w)},        // ImageWidth
		{257, long, 1, uint32(h)},        // ImageLength
		{258, short, 3, bps},             // BitsPerSample: 8,8,8 at bps
		{259, short, 1, 1},               // Compression: none
		{262, short, 1, 2},               // PhotometricInterpretation: RGB
		{273, long, 1, data},             // StripOffsets
		{277, short, 1, 3},               // SamplesPerPixel
		{278, long, 1, uint32(h)},        // RowsPerStrip
		{279, long, 1, uint32(len(pix))}, // StripByteCounts
		{284, short, 1, 1},               // PlanarConfiguration: chunky
	}
	var out bytes.Buffer
	out.WriteString("II*\x00")
	le := binary.LittleEndian
	_ = binary.Write(&out, le, ifd)
	_ = binary.Write(&out, le, uint16(len(es)))
	for _, e := range es {
		_ = binary.Write(&out, le, e.tag)
		_ = binary.Write(&out, le, e.typ)
		_ = binary.Write(&out, le, e.count)
		if e.typ == short && e.count == 1 {
			_ = binary.Write(&out, le, uint16(e.value))
			_ = binary.Write(&out, le, uint16(0))
		} else {
			_ = binary.Write(&out, le, e.value)
		}
	}
	_ = binary.Write(&out, le, uint32(0)) // no next IFD
	_ = binary.Write(&out, le, [3]uint16{8, 8, 8})
	out.Write(pix)
	return out.Bytes()
}

// PNG, JPEG and GIF encode img.
func PNG(img image.Image) []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

func JPEG(img image.Image) []byte {
	var b bytes.Buffer
	_ = jpeg.Encode(&b, img, &jpeg.Options{Quality: 85})
	return b.Bytes()
}

func GIF(img image.Image) []byte {
	var b bytes.Buffer
	_ = gif.Encode(&b, img, nil)
	return b.Bytes()
}
