//go:build !unit

package render_test

import (
	"fmt"
	"image"
	"regexp"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// scripts are lines in scripts Latin fonts lack, each with the fonts
// pdffonts may show for it (DejaVu Sans has Arabic and Hebrew of its own;
// Devanagari and Thai come from Noto's core fonts alone) and five of its
// letters that look unlike one another.
var scripts = []struct {
	name, line string
	font       *regexp.Regexp
	letters    []string
}{
	{"Arabic", "مرحبا بالعالم", regexp.MustCompile(`Noto\w*(Arabic|Naskh)|DejaVuSans`), []string{"ب", "ج", "د", "س", "ع"}},
	{"Hebrew", "שלום עולם", regexp.MustCompile(`Noto\w*Hebrew|DejaVuSans`), []string{"א", "ג", "ש", "ל", "ם"}},
	{"Devanagari", "नमस्ते दुनिया", regexp.MustCompile(`Noto\w*Devanagari`), []string{"क", "ख", "ग", "न", "म"}},
	{"Thai", "สวัสดีชาวโลก", regexp.MustCompile(`Noto\w*Thai`), []string{"ก", "ข", "ค", "ส", "ว"}},
}

// A line in each of Arabic, Hebrew, Devanagari and Thai prints in a real
// font of its script (pdffonts names it, embedded), and its letters are
// drawn as glyphs, not boxes: five letters, each alone in a cell of a
// screenshot, make five different pictures (a missing glyph is the same
// box whatever the letter).
func TestScriptsRenderInRealFonts(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	var page strings.Builder
	page.WriteString(`<!doctype html><meta charset="utf-8"><body style="font-size: 24px">`)
	for _, s := range scripts {
		fmt.Fprintf(&page, `<p>%s: %s</p>`, s.name, s.line)
	}
	out, _ := renderOK(t, m, "html-pdf", []byte(page.String()), nil)
	fonts := testenv.Tool(t, m, "pdffonts", out["output.pdf"])
	for _, s := range scripts {
		if !s.font.MatchString(fonts) {
			t.Errorf("%s: no %s font among the PDF's:\n%s", s.name, s.font, fonts)
		}
	}
	for _, l := range strings.Split(fonts, "\n")[2:] {
		if f := strings.Fields(l); len(f) > 0 && !strings.Contains(l, " yes ") {
			t.Errorf("a font not embedded: %s", l)
		}
	}

	for _, s := range scripts {
		var cells strings.Builder
		cells.WriteString(`<!doctype html><meta charset="utf-8"><body style="margin:0; background:#fff">`)
		for i, l := range s.letters {
			fmt.Fprintf(&cells, `<div style="position:absolute; left:%dpx; top:0; width:100px; height:100px; font-size:64px; line-height:100px; text-align:center">%s</div>`, i*100, l)
		}
		shot, _ := renderOK(t, m, "html-png", []byte(cells.String()), map[string]any{"width": 500, "height": 100})
		img := decode(t, shot["output.png"])
		var seen []image.Image
		for i := range s.letters {
			cell := img.(interface {
				SubImage(image.Rectangle) image.Image
			}).SubImage(image.Rect(i*100, 0, i*100+100, 100))
			for j, other := range seen {
				if d := meanDiff(translate(cell), translate(other)); d < 2 {
					t.Errorf("%s: %q and %q are drawn alike (%.2f levels apart): boxes, not glyphs", s.name, s.letters[i], s.letters[j], d)
				}
			}
			seen = append(seen, cell)
		}
	}
}

// translate copies a sub-image to the origin, so cells compare.
func translate(src image.Image) image.Image {
	b := src.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			dst.Set(x, y, src.At(b.Min.X+x, b.Min.Y+y))
		}
	}
	return dst
}

// wordLines reads pdftotext -bbox's words as lines: each word's page and
// its top, rounded to a tenth of a point, with the words on it.
func wordLines(t *testing.T, m *sandbox.Manager, pdf []byte) []string {
	t.Helper()
	html := testenv.Tool(t, m, "pdftotext", pdf, "-bbox")
	re := regexp.MustCompile(`<page |<word xMin="[^"]*" yMin="([^"]*)"[^>]*>([^<]*)</word>`)
	var lines []string
	page, top := 0, ""
	for _, mm := range re.FindAllStringSubmatch(html, -1) {
		if mm[1] == "" && mm[2] == "" {
			page++
			continue
		}
		if mm[1] != top || len(lines) == 0 {
			top = mm[1]
			lines = append(lines, fmt.Sprintf("page %d at %.5s:", page, top))
		}
		lines[len(lines)-1] += " " + mm[2]
	}
	return lines
}

// A DOCX set in Calibri, which no Linux has, breaks its lines where the
// same DOCX set in Carlito (metric-compatible, what fontconfig gives for
// Calibri) does: the same pages, lines at the same heights with the same
// words; and the PDF embeds Carlito.
func TestCalibriKeepsItsLineBreaks(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	var paras []string
	for i := range 12 {
		paras = append(paras, fmt.Sprintf("Paragraph %d of a report written in Word's default font. Its lines wrap where the font's widths say, so a font of other widths moves every break after the first, and the pages with them.", i+1))
	}
	pdfOf := func(font string) []byte {
		out, _ := renderOK(t, m, "office-pdf", samples.DOCXInFont(font, 11, paras...), nil)
		return out["output.pdf"]
	}
	calibri, carlito := pdfOf("Calibri"), pdfOf("Carlito")
	if fonts := testenv.Tool(t, m, "pdffonts", calibri); !strings.Contains(fonts, "Carlito") {
		t.Errorf("the Calibri document's fonts:\n%s\nwant Carlito", fonts)
	}
	a, b := wordLines(t, m, calibri), wordLines(t, m, carlito)
	if pa, pb := pdfPages(t, m, calibri), pdfPages(t, m, carlito); pa != pb || len(a) < 20 {
		t.Fatalf("%d pages and %d lines in Calibri, %d pages in Carlito", pa, len(a), pb)
	}
	t.Logf("%d lines on %d page(s), the first: %s", len(a), pdfPages(t, m, calibri), a[0])
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("the lines differ:\nCalibri:\n%s\nCarlito:\n%s", strings.Join(a[:min(8, len(a))], "\n"), strings.Join(b[:min(8, len(b))], "\n"))
	}
}
