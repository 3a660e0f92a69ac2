// Package samples generates small, valid documents for tests, the
// benchmark and `make run`, so none of them needs binary fixtures.
package samples

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
)

// PDF returns a PDF of pages US Letter pages; page i says "<text> page i".
// Text must be plain ASCII without parentheses or backslashes.
func PDF(text string, pages int) []byte {
	if strings.ContainsAny(text, `()\`) {
		panic("samples.PDF: text must not contain ( ) or \\")
	}
	var objs []string
	// 1: catalog, 2: pages, 3: font, then a page and its content per page.
	kids := make([]string, pages)
	for i := 0; i < pages; i++ {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), pages),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	)
	for i := 0; i < pages; i++ {
		stream := fmt.Sprintf("BT /F1 24 Tf 72 700 Td (%s page %d) Tj ET", text, i+1)
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream),
		)
	}
	return pdfFile(objs)
}

// NoisePDF returns a PDF of pages US Letter pages, each filled with the
// same w×h RGB image of random pixels (from seed): pages that rasterise to
// large images that do not compress, when w×h is the page's size in
// pixels at the resolution used (850×1100 at 100 dpi).
func NoisePDF(pages, w, h int, seed uint64) []byte {
	px := make([]byte, 3*w*h)
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range px {
		px[i] = byte(rng.Uint32())
	}
	// 1: catalog, 2: pages, 3: the image, 4: the content drawing it, then a
	// page per page.
	kids := make([]string, pages)
	for i := range kids {
		kids[i] = fmt.Sprintf("%d 0 R", 5+i)
	}
	draw := "q 612 0 0 792 0 0 cm /Im Do Q"
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), pages),
		fmt.Sprintf("<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB /BitsPerComponent 8 /Length %d >>\nstream\n%s\nendstream", w, h, len(px), px),
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(draw), draw),
	}
	for range pages {
		objs = append(objs, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im 3 0 R >> >> /Contents 4 0 R >>")
	}
	return pdfFile(objs)
}

// pdfFile numbers objs from 1 and writes them as a PDF whose root is the
// first.
func pdfFile(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// SVG returns a white w×h SVG with a red square of side s at (x, y).
func SVG(w, h, x, y, s int) []byte {
	return []byte(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">
  <rect width="%d" height="%d" fill="#ffffff"/>
  <rect x="%d" y="%d" width="%d" height="%d" fill="#ff0000"/>
</svg>
`, w, h, w, h, w, h, x, y, s, s))
}

// HTML returns a small HTML page with a heading and a paragraph.
func HTML(heading, para string) []byte {
	return []byte(fmt.Sprintf(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>body{font-family:sans-serif;margin:2cm} h1{color:#b00}</style></head>
<body><h1>%s</h1><p>%s</p></body></html>
`, heading, heading, para))
}

// Markdown returns a Markdown document with a heading, a GFM table, a task
// list and a raw <script> that a safe renderer must not pass through.
func Markdown(title string) []byte {
	return []byte(fmt.Sprintf(`# %s

Some *emphasis*, **strong** text and ~~strikethrough~~.

| Renderer | Output |
|----------|--------|
| pdf-png  | PNG    |
| dot-svg  | SVG    |

- [x] sandboxed
- [ ] shared

<script>alert("xss")</script>
`, title))
}

// DOT returns a small directed graph whose node labels are given.
func DOT(labels ...string) []byte {
	var b strings.Builder
	b.WriteString("digraph G {\n  rankdir=LR;\n")
	for i := 0; i+1 < len(labels); i++ {
		fmt.Fprintf(&b, "  %q -> %q;\n", labels[i], labels[i+1])
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// RTF returns an RTF document with one paragraph of text (ASCII, no braces
// or backslashes).
func RTF(text string) []byte {
	return []byte(`{\rtf1\ansi\deff0{\fonttbl{\f0 Helvetica;}}\f0\fs24 ` + text + `\par}`)
}

// PDFPage returns a one-page PDF whose page is w×h points.
func PDFPage(w, h int) []byte {
	p := PDF("giant", 1)
	return bytes.Replace(p, []byte("/MediaBox [0 0 612 792]"), []byte(fmt.Sprintf("/MediaBox [0 0 %d %d]", w, h)), 1)
}

// UnknownOptions returns an options object of at least size bytes made of
// distinct made-up keys ("k0000000": 1, …), then last: the shape of the
// oversized options part in docs/security.md, "Request intake bounds".
func UnknownOptions(size int, last string) []byte {
	var b bytes.Buffer
	b.Grow(size + 64)
	b.WriteString("{")
	key := []byte(`"k0000000":1,`)
	for i := 0; b.Len() < size; i++ {
		for j, n := 8, i; j > 1; j, n = j-1, n/10 {
			key[j] = byte('0' + n%10)
		}
		b.Write(key)
	}
	b.WriteString(last + "}")
	return b.Bytes()
}
