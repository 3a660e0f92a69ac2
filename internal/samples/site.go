package samples

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
)

// Site is a page and the files it loads, by path, in the order they are
// sent (the page first).
type Site struct {
	Files map[string][]byte
	Order []string
}

// Zip packs the site's files, in order, into a ZIP.
func (s Site) Zip() []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, n := range s.Order {
		w, err := zw.Create(n)
		if err != nil {
			panic(err)
		}
		_, _ = w.Write(s.Files[n])
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// Crowd is a site of index.html and n-1 small files beside it, in that
// order.
func Crowd(n int) Site {
	s := Site{Files: map[string][]byte{"index.html": []byte("<!DOCTYPE html><p>index</p>")}, Order: []string{"index.html"}}
	for i := 1; i < n; i++ {
		name := fmt.Sprintf("f/%04d.txt", i)
		s.Files[name], s.Order = []byte(name), append(s.Order, name)
	}
	return s
}

// ZipUnderstated is z, a ZIP without ZIP64 records, with its end record's
// directory size cut to its first entry's (the count stays): a reader that
// stops at the stated size sees that entry alone, archive/zip, which reads
// on, all of them.
func ZipUnderstated(z []byte) []byte {
	le := binary.LittleEndian
	z = bytes.Clone(z)
	end := z[bytes.LastIndex(z, []byte("PK\x05\x06")):]
	first := z[le.Uint32(end[16:]):]
	le.PutUint32(end[12:], 46+uint32(le.Uint16(first[28:]))+uint32(le.Uint16(first[30:]))+uint32(le.Uint16(first[32:])))
	return z
}

// Report is an HTML report with a linked stylesheet, a PNG, a web font
// (font, a TrueType file, as "Report Mono" for the title) and a chart its
// script draws 300 ms after the load. Each leaves a mark in the PDF:
// the title and "Chart drawn by script" in its text, the font in its fonts,
// and, printed without margins and rasterised at 96 dpi, the PNG's red at
// (50, 250), the stylesheet's blue bar (drawn by the script) at (350, 250)
// and white at (200, 250).
func Report(font []byte) Site {
	red := image.NewRGBA(image.Rect(0, 0, 100, 100))
	for y := 0; y < 100; y++ {
		for x := 0; x < 100; x++ {
			red.Set(x, y, color.RGBA{255, 0, 0, 255})
		}
	}
	return Site{
		Files: map[string][]byte{
			"index.html": []byte(`<!DOCTYPE html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="css/report.css"><script src="js/chart.js"></script></head>
<body><h1 class="title">Quarterly fidelity report</h1>
<img src="img/red.png" style="position:absolute;left:0;top:200px;width:100px;height:100px">
<div id="chart"></div></body></html>`),
			"css/report.css": []byte(`@font-face { font-family: "Report Mono"; src: url("../fonts/report.ttf"); }
body { margin: 0; }
h1.title { font-family: "Report Mono"; }
.bar { position: absolute; left: 300px; top: 200px; width: 100px; height: 100px; background: #0000ff; }`),
			"js/chart.js": []byte(`window.addEventListener("load", () => setTimeout(() => {
  const c = document.getElementById("chart");
  c.innerHTML = '<div class="bar"></div><p>Chart drawn by script</p>';
}, 300));`),
			"img/red.png":      PNG(red),
			"fonts/report.ttf": font,
		},
		Order: []string{"index.html", "css/report.css", "js/chart.js", "img/red.png", "fonts/report.ttf"},
	}
}

// ImagePage is a page of n distinct 40×40 PNG images, each its own file:
// index.html first, then img0.png … The broker's cost is measured on it,
// served by URL against the same files uploaded as a ZIP
// (TestURLPageCostPerSubresource, make bench's url line).
func ImagePage(n int) Site {
	var page bytes.Buffer
	page.WriteString(`<!doctype html><body style="margin:0">`)
	s := Site{Files: map[string][]byte{}, Order: []string{"index.html"}}
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, 40, 40))
		for j := range img.Pix {
			img.Pix[j] = byte(i*10 + j%4)
		}
		name := fmt.Sprintf("img%d.png", i)
		s.Files[name], s.Order = PNG(img), append(s.Order, name)
		fmt.Fprintf(&page, `<img src="%s">`, name)
	}
	s.Files["index.html"] = page.Bytes()
	return s
}

// StoredZip packs files (name, bytes), in order, as stored (uncompressed)
// entries: what the API makes of several file parts.
func StoredZip(files ...[2][]byte) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range files {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: string(f[0]), Method: zip.Store})
		if err != nil {
			panic(err)
		}
		_, _ = w.Write(f[1])
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// AttachJob is pdf-attach's sample: a PDF of pages, then an XML file to
// embed.
func AttachJob(pages int) []byte {
	return StoredZip([2][]byte{[]byte("doc.pdf"), PDF("attach", pages)},
		[2][]byte{[]byte("data.xml"), []byte(`<?xml version="1.0"?><Data><ID>1</ID></Data>`)})
}

// FacturXJob is factur-x's sample: an invoice's PDF, then its XML.
func FacturXJob(pages int) []byte {
	return StoredZip([2][]byte{[]byte("invoice.pdf"), PDF("invoice", pages)}, [2][]byte{[]byte("invoice.xml"), FacturXML("F-1")})
}
