//go:build !unit

package render_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// The text every office test document carries.
const officeText = "Invoice 2026-117"

// binaryOffice makes .doc, .xls and .ppt from generated OOXML with
// LibreOffice itself, in a sandbox.
func binaryOffice(t *testing.T, m *sandbox.Manager) map[string][]byte {
	t.Helper()
	got := testenv.OfficeFiles(t, m,
		testenv.OfficeSave{Input: "a.docx", Data: samples.DOCX(officeText), Filter: "MS Word 97"},
		testenv.OfficeSave{Input: "a.xlsx", Data: samples.XLSX(officeText), Filter: "MS Excel 97"},
		testenv.OfficeSave{Input: "a.pptx", Data: samples.PPTX(officeText), Filter: "MS PowerPoint 97"},
	)
	return map[string][]byte{"doc": got[0], "xls": got[1], "ppt": got[2]}
}

// Every office format office-pdf accepts beyond OOXML and packaged ODF is
// told from its bytes and converts, its text in the PDF: the binary
// Office formats, an ODF drawing and template, flat ODF, StarOffice XML.
func TestOfficeFormatsToPDF(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	docs := binaryOffice(t, m)
	docs["odg"] = samples.ODG(officeText)
	docs["ott"] = samples.OTT(officeText)
	docs["fodt"] = samples.FODT(officeText)
	docs["sxw"] = samples.SXW(officeText)
	want := map[string]string{
		"doc": render.TypeDOC, "xls": render.TypeXLS, "ppt": render.TypePPT, "odg": render.TypeODG,
		"ott": render.TypeOTT, "fodt": render.TypeFODT, "sxw": render.TypeSXW,
	}
	for name, doc := range docs {
		if got := render.Sniff(doc); got != want[name] {
			t.Errorf("%s: sniffed as %s, want %s", name, got, want[name])
			continue
		}
		out, _ := renderOK(t, m, "office-pdf", doc, nil)
		if text := pdfText(t, m, out["output.pdf"]); !strings.Contains(text, officeText) {
			t.Errorf("%s: pdftotext = %q, want %q in it", name, text, officeText)
		}
	}
}

// pdfUAPart finds PDF/UA-1's identification in XMP, as an element or an
// attribute.
var pdfUAPart = regexp.MustCompile(`pdfuaid:part(>|=")1[<"]`)

// officeCase is one office-pdf job and what its PDF must show.
type officeCase struct {
	name  string
	input []byte
	opts  map[string]any
	// csv: the input is declared text/csv, as a client's input_type.
	csv   bool
	check func(t *testing.T, m *sandbox.Manager, pdf []byte)
	// fails, when set, is what the render_failed message must say.
	fails string
}

// officeCases are the options' fidelity checks, on the PDF itself.
func officeCases(encrypted []byte) []officeCase {
	pages := samples.DOCXPages("First page text", "Second page text", "Third page text")
	return []officeCase{
		{name: "landscape", input: samples.DOCX(officeText), opts: map[string]any{"landscape": true},
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				if w, h := pageSize(t, m, pdf); w <= h {
					t.Errorf("landscape: page %g×%g pt, want wider than tall", w, h)
				}
			}},
		{name: "portrait, not PDF/UA, by default", input: samples.DOCX(officeText),
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				if w, h := pageSize(t, m, pdf); w >= h {
					t.Errorf("default: page %g×%g pt, want taller than wide", w, h)
				}
				if meta := testenv.Tool(t, m, "pdfinfo", pdf, "-meta"); strings.Contains(meta, "pdfuaid") {
					t.Errorf("default: XMP %q names PDF/UA", meta)
				}
			}},
		{name: "page_ranges", input: pages, opts: map[string]any{"page_ranges": "2"},
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				wantPages(t, m, pdf, 1)
				text := pdfText(t, m, pdf)
				if !strings.Contains(text, "Second page text") || strings.Contains(text, "First page text") || strings.Contains(text, "Third page text") {
					t.Errorf("page_ranges 2: text %q, want the second page's alone", text)
				}
			}},
		{name: "single_page_sheets", input: samples.XLSXSheets(150, 12, "Alpha", "Beta"), opts: map[string]any{"single_page_sheets": true},
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				wantPages(t, m, pdf, 2)
				text := pdfText(t, m, pdf)
				// A cell's text wider than its column is clipped at ten
				// characters: "Beta r150c12" reads "Beta r150c".
				for _, want := range []string{"Alpha r150", "Beta r150"} {
					if !strings.Contains(text, want) {
						t.Errorf("single_page_sheets: text lacks %q: …%s", want, text[max(0, len(text)-400):])
					}
				}
			}},
		{name: "password", input: encrypted, opts: map[string]any{"password": "s3cret pass"},
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				if text := pdfText(t, m, pdf); !strings.Contains(text, officeText) {
					t.Errorf("password: text %q, want %q", text, officeText)
				}
			}},
		{name: "no password", input: encrypted, fails: "password-protected: give its password in the password option"},
		{name: "wrong password", input: encrypted, opts: map[string]any{"password": "nope"}, fails: "the password does not open"},
		{name: "csv", csv: true, input: []byte("name,amount\n\"Smith, J\",42\nÉlodie,7\n"),
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				text := pdfText(t, m, pdf)
				// Quoted commas stay in their cell; UTF-8 is read as such.
				for _, want := range []string{"Smith, J", "Élodie", "amount"} {
					if !strings.Contains(text, want) {
						t.Errorf("csv: text %q, want %q in it", text, want)
					}
				}
				if strings.Contains(text, `"Smith`) {
					t.Errorf("csv: the quotes were printed: %q", text)
				}
			}},
		{name: "pdf_ua", input: samples.DOCX(officeText), opts: map[string]any{"pdf_ua": true},
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				info := pdfInfo(t, m, pdf)
				meta := testenv.Tool(t, m, "pdfinfo", pdf, "-meta")
				if info["Tagged"] != "yes" || !pdfUAPart.MatchString(meta) {
					t.Errorf("pdf_ua: tagged %q, XMP %q; want tagged and pdfuaid:part 1", info["Tagged"], meta)
				}
			}},
		{name: "pdf_a", input: samples.DOCX(officeText), opts: map[string]any{"pdf_a": "2b"},
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				if bad := pdfaProblems(t, m, pdf, "2"); len(bad) > 0 {
					t.Errorf("pdf_a 2b: %s", strings.Join(bad, "; "))
				}
			}},
		{name: "pdf_a 1b", input: samples.DOCX(officeText), opts: map[string]any{"pdf_a": "1b"},
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				// LibreOffice writes part 1 as PDF/A-1a (tagged), which
				// meets 1b's every rule and more.
				var bad []string
				for _, p := range pdfaProblems(t, m, pdf, "1") {
					if !strings.Contains(p, "pdfaid:conformance>A A]") {
						bad = append(bad, p)
					}
				}
				if len(bad) > 0 {
					t.Errorf("pdf_a 1b: %s", strings.Join(bad, "; "))
				}
			}},
		{name: "txt", input: []byte("Plain text, line one\nLigne deux : été\n"),
			check: func(t *testing.T, m *sandbox.Manager, pdf []byte) {
				if text := pdfText(t, m, pdf); !strings.Contains(text, "Ligne deux : été") {
					t.Errorf("txt: text %q", text)
				}
			}},
	}
}

// encryptedDOCX makes a password-protected DOCX with LibreOffice.
func encryptedDOCX(t *testing.T, m *sandbox.Manager) []byte {
	t.Helper()
	enc := testenv.OfficeFiles(t, m, testenv.OfficeSave{Input: "a.docx", Data: samples.DOCX(officeText), Filter: "MS Word 2007 XML", Password: "s3cret pass"})[0]
	if got := render.Sniff(enc); got != render.TypeOOXMLEncrypted {
		t.Fatalf("the encrypted docx sniffs as %s, want %s", got, render.TypeOOXMLEncrypted)
	}
	return enc
}

// officePlan prepares c's job.
func officePlan(t *testing.T, c officeCase) *render.Plan {
	t.Helper()
	r, _ := render.Lookup("office-pdf")
	declared := ""
	if c.csv {
		declared = "text/csv"
	}
	opts, _ := json.Marshal(c.opts)
	plan, err := r.PrepareTyped(c.input, declared, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.csv && plan.Job.Request.InputName != "input.csv" {
		t.Fatalf("declared text/csv, the input is named %s", plan.Job.Request.InputName)
	}
	plan.Job.Input = bytes.NewReader(c.input)
	return plan
}

// checkOffice checks how c's job ended.
func checkOffice(t *testing.T, m *sandbox.Manager, c officeCase, res *sandbox.Result, err error, took time.Duration) {
	t.Helper()
	if c.fails != "" {
		var e *sandbox.Error
		if !errors.As(err, &e) || e.Outcome != sandbox.RenderFailed || !strings.Contains(e.Msg, c.fails) {
			t.Errorf("%s: %v, want render_failed saying %q", c.name, err, c.fails)
		} else if took > 30*time.Second {
			t.Errorf("%s: failed after %s, want it at once", c.name, took)
		}
		if e != nil && (strings.Contains(e.Msg, "s3cret") || strings.Contains(e.Msg, "nope")) {
			t.Errorf("%s: the error shows the password: %q", c.name, e.Msg)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v", c.name, err)
		return
	}
	r, _ := render.Lookup("office-pdf")
	outs, err := r.AcceptOutputs(res.Response.Files)
	if err != nil || len(outs) != 1 {
		t.Errorf("%s: outputs %v (%v)", c.name, outs, err)
		return
	}
	c.check(t, m, outs[0].Data)
}

// Each option of office-pdf, checked on the PDF, in a cold sandbox (the
// agent boots LibreOffice for the job) and in pool sandboxes (booted, or
// restored, before the job).
func TestOfficeOptions(t *testing.T) {
	t.Parallel() // its one timing bound, a refusal within 30 s, holds on shared cores
	m := testenv.Manager(t, sandbox.Config{})
	cases := officeCases(encryptedDOCX(t, m))
	t.Run("cold", func(t *testing.T) {
		for _, c := range cases {
			t0 := time.Now()
			res, err := m.Run(context.Background(), officePlan(t, c).Job)
			t.Logf("%s: %s", c.name, time.Since(t0))
			checkOffice(t, m, c, res, err, time.Since(t0))
		}
	})
	t.Run("warm", func(t *testing.T) {
		p := poolOf(t, m, render.FamilyOffice, 1, true)
		for _, c := range cases {
			waitIdle(t, p, render.FamilyOffice, 1, 3*time.Minute)
			plan := officePlan(t, c)
			t0 := time.Now()
			sb, mode := p.Take(context.Background(), render.FamilyOffice, plan.Job.Limits)
			if sb == nil || mode != sandbox.ModeRestored {
				t.Fatalf("pool gave %v in mode %q", sb, mode)
			}
			res, err := m.RunIn(context.Background(), sb, plan.Job)
			t.Logf("%s: %s", c.name, time.Since(t0))
			checkOffice(t, m, c, res, err, time.Since(t0))
		}
	})
}

func pageSize(t *testing.T, m *sandbox.Manager, pdf []byte) (w, h float64) {
	t.Helper()
	s := pdfInfo(t, m, pdf)["Page size"]
	if _, err := fmt.Sscanf(s, "%g x %g", &w, &h); err != nil {
		t.Fatalf("pdfinfo page size %q: %v", s, err)
	}
	return w, h
}

func wantPages(t *testing.T, m *sandbox.Manager, pdf []byte, n int) {
	t.Helper()
	if got := pdfInfo(t, m, pdf)["Pages"]; got != strconv.Itoa(n) {
		t.Errorf("pdfinfo pages %s, want %d", got, n)
	}
}

// imageLine is pdfimages -list's line of the first image: its width in
// pixels, horizontal resolution and stored size.
func imageLine(t *testing.T, m *sandbox.Manager, pdf []byte) (width int, ppi int, size string) {
	t.Helper()
	for _, l := range strings.Split(testenv.Tool(t, m, "pdfimages", pdf, "-list"), "\n") {
		f := strings.Fields(l)
		if len(f) >= 16 && f[2] == "image" {
			width, _ = strconv.Atoi(f[3])
			ppi, _ = strconv.Atoi(f[12])
			return width, ppi, f[14]
		}
	}
	t.Fatalf("no image in the PDF")
	return
}

// sizeBytes reads pdfimages' size column (123B, 61.9K, 1.2M).
func sizeBytes(s string) float64 {
	mult := map[byte]float64{'B': 1, 'K': 1 << 10, 'M': 1 << 20}[s[len(s)-1]]
	v, _ := strconv.ParseFloat(s[:len(s)-1], 64)
	return v * mult
}

// The image options, checked on the PDF: the picture's pixels and
// resolution (max_image_resolution) and its stored size (quality).
func TestOfficeImageOptions(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	doc := samples.FODTImage(encodePNG(samples.Noise(600, 600, 7)))
	run := func(opts map[string]any) []byte {
		out, _ := renderOK(t, m, "office-pdf", doc, opts)
		return out["output.pdf"]
	}
	def := run(nil)
	w, ppi, size := imageLine(t, m, def)
	if w != 600 || ppi < 280 || ppi > 320 {
		t.Errorf("default: the picture is %d px at %d ppi, want 600 px at 300", w, ppi)
	}
	if text := pdfText(t, m, def); !strings.Contains(text, "A picture") {
		t.Errorf("default: text %q", text)
	}
	if w, ppi, _ := imageLine(t, m, run(map[string]any{"max_image_resolution": 75})); w > 160 || ppi > 80 {
		t.Errorf("max_image_resolution 75: the picture is %d px at %d ppi, want about 150 px at 75", w, ppi)
	}
	if _, _, low := imageLine(t, m, run(map[string]any{"quality": 5})); sizeBytes(low) > sizeBytes(size)/2 {
		t.Errorf("quality 5: the picture takes %s, want well under half of quality 90's %s", low, size)
	}
}

// Several documents in one office-pdf job: two DOCX and a PDF, converted
// by one LibreOffice and merged in the parts' order, a bookmark on each
// part's first page; one DOCX alone gets its bookmark too.
func TestOfficeMergesDocuments(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := storedZip(t, zip.Store,
		[2][]byte{[]byte("report.docx"), samples.DOCXPages("Report page one", "Report page two")},
		[2][]byte{[]byte("scan.pdf"), samples.PDF("gamma", 2)},
		[2][]byte{[]byte("annex.docx"), samples.DOCX("Annex text")})
	for _, tc := range []struct {
		opts map[string]any
		want string
	}{
		{nil, ""},
		{map[string]any{"bookmarks": true}, "report@1 scan@3 annex@5"},
		{map[string]any{"titles": "The report\nThe scan\nAnnexe — données", "page_ranges": "1"}, "The report@1 The scan@2 Annexe — données@4"},
	} {
		out, res := renderOK(t, m, "office-pdf", input, tc.opts)
		pdf := out["output.pdf"]
		if got := outlineOf(t, m, pdf); got != tc.want {
			t.Errorf("%v: bookmarks %q, want %q", tc.opts, got, tc.want)
		}
		want := []string{"Report page one", "Report page two", "gamma page 1", "gamma page 2", "Annex text"}
		if tc.opts["page_ranges"] != nil {
			// The range applies to each converted document; a PDF is
			// taken as it is.
			want = []string{"Report page one", "gamma page 1", "gamma page 2", "Annex text"}
		}
		if got := pageTexts(t, m, pdf); !equal(got, want) {
			t.Errorf("%v: pages say %q, want %q (stderr %s)", tc.opts, got, want, res.StderrTail)
		}
	}
	out, _ := renderOK(t, m, "office-pdf", samples.DOCX("Alone"), map[string]any{"titles": "Only part"})
	if got := outlineOf(t, m, out["output.pdf"]); got != "Only part@1" {
		t.Errorf("one document with a title: bookmarks %q, want %q", got, "Only part@1")
	}
}
