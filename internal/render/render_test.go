//go:build !unit

package render_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

func TestSniff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"pdf", samples.PDF("x", 1), render.TypePDF},
		{"svg with declaration", samples.SVG(10, 10, 1, 1, 2), render.TypeSVG},
		{"bare svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), render.TypeSVG},
		{"svg with doctype subset", []byte("<?xml version=\"1.0\"?>\n<!DOCTYPE svg [<!ENTITY a \"b\">]>\n<!-- c -->\n<svg>"), render.TypeSVG},
		{"html", samples.HTML("a", "b"), render.TypeHTML},
		{"html fragment", []byte("<h1>hi</h1>"), render.TypeHTML},
		{"meta charset first", []byte("<meta charset=\"utf-8\">\n<p>hi</p>"), render.TypeHTML},
		{"section fragment", []byte("<section class=a>hi</section>"), render.TypeHTML},
		{"upper-case tag", []byte("\n  <SECTION>hi</SECTION>"), render.TypeHTML},
		{"BOM before doctype", []byte("\xef\xbb\xbf<!DOCTYPE html><title>x</title>"), render.TypeHTML},
		{"comment before doctype", []byte("<!-- generated -->\n<!doctype HTML>"), render.TypeHTML},
		{"xhtml", []byte("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Strict//EN\" \"x\">\n<html xmlns=\"http://www.w3.org/1999/xhtml\"></html>"), render.TypeHTML},
		{"xhtml without doctype", []byte("<?xml version=\"1.0\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"/>"), render.TypeHTML},
		{"prose then markup", []byte("Quarterly report\n<p>Revenue <b>up</b></p>"), render.TypeHTML},
		{"prose with a less-than", []byte("a < b and b <c> d"), render.TypeText},
		{"other xml", []byte("<?xml version=\"1.0\"?><note><to>x</to></note>"), "text/xml"},
		{"binary with a tag", []byte("x\x00<p>y"), render.TypeUnknown},
		{"svgfoo is not svg", []byte("<svgfoo/>"), render.TypeText},
		// Markdown with inline HTML is HTML to a browser too; the
		// Markdown renderers take both.
		{"markdown with a script tag", samples.Markdown("t"), render.TypeHTML},
		{"markdown", []byte("# Title\n\nSome *emphasis* and a [link](https://example.com).\n"), render.TypeText},
		{"dot", samples.DOT("a", "b"), render.TypeDOT},
		{"strict graph with comment", []byte("// c\nstrict graph {\n a -- b }"), render.TypeDOT},
		{"graph-like prose", []byte("graph theory is fun"), render.TypeText},
		{"rtf", samples.RTF("x"), render.TypeRTF},
		{"docx", samples.DOCX("x"), render.TypeDOCX},
		{"xlsx", samples.XLSX("x"), render.TypeXLSX},
		{"odt", samples.ODT("x"), render.TypeODT},
		{"png", samples.PNGHeader(1, 1), render.TypePNG},
		{"tiff", []byte("II*\x00\x08\x00\x00\x00"), render.TypeTIFF},
		{"gif", []byte("GIF89a\x01\x00\x01\x00"), render.TypeGIF},
		{"jpeg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF"), render.TypeJPEG},
		{"plain zip", zipWith("a.txt"), render.TypeZIP},
		{"empty", nil, render.TypeEmpty},
	} {
		if got := render.Sniff(tc.in); got != tc.want {
			t.Errorf("%s: Sniff = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// good is a valid input per renderer; wrong is one it must refuse.
var good = map[string][]byte{
	"html-pdf": samples.HTML("a", "b"), "html-png": samples.HTML("a", "b"),
	"markdown-html": samples.Markdown("a"), "markdown-pdf": samples.Markdown("a"),
	"pdf-png": samples.PDF("a", 1), "svg-png": samples.SVG(2, 2, 0, 0, 1), "svg-pdf": samples.SVG(2, 2, 0, 0, 1),
	"dot-svg": samples.DOT("a", "b"), "dot-png": samples.DOT("a", "b"),
	"image-thumbnail": encodePNG(samples.Image(4, 4, 0, 0, 1)), "office-pdf": samples.DOCX("a"),
	"pdf-merge": samples.PDF("a", 1), "pdf-split": samples.PDF("a", 1), "pdf-pages": samples.PDF("a", 1),
	"pdf-metadata": samples.PDF("a", 1), "pdf-protect": samples.PDF("a", 1), "pdf-unlock": samples.PDF("a", 1), "pdf-bookmarks": samples.PDF("a", 1), "pdf-attach": samples.AttachJob(1), "factur-x": samples.FacturXJob(1),
	"safe-pdf": samples.PDF("a", 1),
}

// goodOptions are the options a renderer cannot go without.
var goodOptions = map[string]map[string]any{"pdf-protect": {"owner_password": "o"}}

var wrong = map[string][]byte{
	"html-pdf": samples.PDF("a", 1), "html-png": samples.SVG(2, 2, 0, 0, 1),
	"markdown-html": samples.PDF("a", 1), "markdown-pdf": encodePNG(samples.Image(4, 4, 0, 0, 1)),
	"pdf-png": samples.HTML("a", "b"), "svg-png": samples.PDF("a", 1), "svg-pdf": samples.HTML("a", "b"),
	"dot-svg": samples.Markdown("a"), "dot-png": samples.SVG(2, 2, 0, 0, 1),
	"image-thumbnail": samples.SVG(2, 2, 0, 0, 1), "office-pdf": encodePNG(samples.Image(4, 4, 0, 0, 1)),
	"pdf-merge": samples.HTML("a", "b"), "pdf-split": samples.DOCX("a"), "pdf-pages": samples.SVG(2, 2, 0, 0, 1),
	"pdf-metadata": samples.Markdown("a"), "pdf-protect": encodePNG(samples.Image(4, 4, 0, 0, 1)), "pdf-unlock": samples.HTML("a", "b"), "pdf-bookmarks": samples.SVG(2, 2, 0, 0, 1), "pdf-attach": samples.PDF("alone", 1), "factur-x": samples.PDF("alone", 1),
	"safe-pdf": zipWith("evil.exe"),
}

func TestEveryRendererRefusesBadRequestsBeforeAnySandbox(t *testing.T) {
	t.Parallel()
	if len(render.Names()) != 26 {
		t.Errorf("the catalogue has %d renderers, want 26: %v", len(render.Names()), render.Names())
	}
	for _, r := range render.All() {
		in, ok := good[r.Name]
		if !ok {
			t.Errorf("no sample input for %s", r.Name)
			continue
		}
		opts := goodOptions[r.Name]
		if _, err := r.Prepare(in, opts, render.LimitRequest{}); err != nil {
			t.Errorf("%s: Prepare(valid input) = %v", r.Name, err)
		}
		if _, err := r.Prepare(wrong[r.Name], nil, render.LimitRequest{}); !errors.Is(err, render.ErrUnsupportedInput) {
			t.Errorf("%s: Prepare(wrong type) = %v, want unsupported input", r.Name, err)
		}
		if _, err := r.Prepare(nil, nil, render.LimitRequest{}); !errors.Is(err, render.ErrUnsupportedInput) {
			t.Errorf("%s: Prepare(zero bytes) = %v, want unsupported input", r.Name, err)
		}
		_, err := r.Prepare(in, map[string]any{"bogus_option": 1}, render.LimitRequest{})
		if !errors.Is(err, render.ErrInvalidOptions) || !strings.Contains(err.Error(), `"bogus_option"`) {
			t.Errorf("%s: Prepare(unknown option) = %v, want invalid options naming it", r.Name, err)
		}
		// Every bounded option refuses a value past its maximum, and every
		// enum a value outside it.
		for _, o := range r.Options {
			var bad any
			switch {
			case o.Maximum != nil:
				bad = *o.Maximum + 1
			case len(o.Enum) > 0:
				bad = "not-" + o.Enum[0]
			case o.Pattern != "":
				// No pattern takes a NUL, not even a password's.
				bad = "\x00; rm -rf /"
			case o.MaxLength > 0:
				bad = strings.Repeat("x", o.MaxLength+1)
			case o.Type == "boolean":
				bad = "yes"
			default:
				continue
			}
			with := map[string]any{o.Name: bad}
			for k, v := range opts {
				if k != o.Name {
					with[k] = v
				}
			}
			if _, err := r.Prepare(in, with, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
				t.Errorf("%s: option %s = %v accepted (%v), want invalid options", r.Name, o.Name, bad, err)
			}
		}
		too := make([]byte, r.MaxInputBytes+1)
		copy(too, in)
		if _, err := r.Prepare(too, nil, render.LimitRequest{}); !errors.Is(err, render.ErrInputTooLarge) {
			t.Errorf("%s: Prepare(oversized) = %v, want input too large", r.Name, err)
		}
	}
}

func TestLimitsCanBeLoweredNeverRaised(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("pdf-png")
	in := samples.PDF("a", 1)
	for _, lim := range []render.LimitRequest{
		{TimeoutSeconds: 3600}, {MemoryBytes: 64 << 30}, {MaxOutputBytes: 1 << 40}, {MaxPages: 10000}, {TimeoutSeconds: -1},
		{MaxPixels: 10}, // does not apply to pdf-png
	} {
		if _, err := r.Prepare(in, nil, lim); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("limits %+v accepted (%v)", lim, err)
		}
	}
	p, err := r.Prepare(in, nil, render.LimitRequest{TimeoutSeconds: 5, MaxPages: 2, MaxOutputBytes: 1 << 20, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if l := p.Job.Limits; l.Timeout.Seconds() != 5 || l.MaxOutputBytes != 1<<20 || l.MemoryBytes != 256<<20 || p.Limits.MaxPages != 2 {
		t.Errorf("lowered limits = %+v (pages %d)", l, p.Limits.MaxPages)
	}
	if argv := strings.Join(p.Job.Request.Steps[0].Argv, " "); !strings.Contains(argv, "-f 1 -l 2") {
		t.Errorf("pdftoppm argv %q does not stop at max_pages", argv)
	}
	if _, err := render.Lookup("exe-shell"); !errors.Is(err, render.ErrUnknownRenderer) {
		t.Errorf("Lookup(exe-shell) = %v, want ErrUnknownRenderer", err)
	}
}

func TestHugeImagesAreRefusedFromTheirHeader(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("image-thumbnail")
	// 100000 × 100000 announced in 33 bytes: refused without decoding.
	_, err := r.Prepare(samples.PNGHeader(100000, 100000), nil, render.LimitRequest{})
	if !errors.Is(err, render.ErrInputTooLarge) || !strings.Contains(err.Error(), "10000000000 pixels") {
		t.Errorf("Prepare(10 gigapixel header) = %v, want input too large", err)
	}
	small := encodePNG(samples.Image(100, 100, 0, 0, 1))
	if _, err := r.Prepare(small, nil, render.LimitRequest{MaxPixels: 9999}); !errors.Is(err, render.ErrInputTooLarge) {
		t.Errorf("a 10000-pixel image under a lowered limit of 9999: %v", err)
	}
	if _, err := r.Prepare(small[:20], nil, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidInput) {
		t.Errorf("a truncated PNG: %v, want invalid input", err)
	}
}

func TestPrepareJSON(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("pdf-png")
	p, err := r.PrepareJSON(samples.PDF("a", 1), []byte(`{"dpi": 72, "format": "jpeg"}`), []byte(`{"timeout_seconds": 9}`))
	if err != nil {
		t.Fatal(err)
	}
	if argv := strings.Join(p.Job.Request.Steps[0].Argv, " "); !strings.Contains(argv, "-r 72") || !strings.Contains(argv, "-jpeg") {
		t.Errorf("argv %q lacks the options", argv)
	}
	for _, bad := range [][2]string{{`[1]`, ``}, {`{"dpi": "72"}`, ``}, {`{"dpi": 72.5}`, ``}, {``, `{"timeout": 1}`}} {
		if _, err := r.PrepareJSON(samples.PDF("a", 1), []byte(bad[0]), []byte(bad[1])); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("PrepareJSON(%s, %s) = %v, want invalid options", bad[0], bad[1], err)
		}
	}
}

// office-pdf names only the document: the agent picks LibreOffice's argv
// (and uses one booted ahead when the sandbox has it).
func TestOfficeRequestNamesOnlyTheDocument(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("office-pdf")
	p, err := r.Prepare(samples.DOCX("a"), nil, render.LimitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	req := p.Job.Request
	want := wire.Office{Input: wire.InputDir + "/input.docx", OutDir: wire.OutputDir, Format: wire.OfficePDF}
	got := wire.Office{}
	if req.Office != nil {
		got = *req.Office
		got.Options = nil
	}
	if !reflect.DeepEqual(got, want) || len(req.Steps) != 0 || len(req.Argv) != 0 {
		t.Errorf("request office %+v, steps %v, argv %v; want office %+v and nothing to run", req.Office, req.Steps, req.Argv, want)
	}
	// LibreOffice's own defaults, as Gotenberg has them.
	wantOpts := wire.OfficeOptions{Quality: 90, ExportFormFields: true}
	if req.Office == nil || req.Office.Options == nil || *req.Office.Options != wantOpts {
		t.Errorf("office options %+v, want %+v", req.Office.Options, wantOpts)
	}
}

func zipWith(name string) []byte {
	var b bytes.Buffer
	zipWrite(&b, name)
	return b.Bytes()
}

func TestDeclaredInputType(t *testing.T) {
	t.Parallel()
	prose := []byte("Quarterly report: revenue up, costs down.\n")
	csv := []byte("name,amount\nwidgets,12\n")
	for _, tc := range []struct {
		name, renderer, declared string
		in                       []byte
		want                     string // the plan's input type, or "" for a refusal
		says                     string // in the refusal
	}{
		{"prose refused as html without a declaration", "html-pdf", "", prose, "", "declare"},
		{"prose declared html", "html-pdf", "text/html", prose, render.TypeHTML, ""},
		{"declared with utf-8 charset", "html-pdf", "text/html; charset=UTF-8", prose, render.TypeHTML, ""},
		{"declared latin-1", "html-pdf", "text/html; charset=iso-8859-1", prose, "", "only UTF-8"},
		{"xhtml declared", "html-png", "application/xhtml+xml", prose, render.TypeHTML, ""},
		{"markdown declared", "markdown-pdf", "text/markdown", samples.HTML("a", "b"), render.TypeMarkdown, ""},
		{"csv declared for a renderer without csv", "html-pdf", "text/csv", csv, "", "not text/csv"},
		{"pdf declared html", "html-pdf", "text/html", samples.PDF("a", 1), "", "not UTF-8 text"},
		{"pdf declared pdf", "pdf-png", "application/pdf", samples.PDF("a", 1), render.TypePDF, ""},
		{"text declared pdf", "pdf-png", "application/pdf", prose, "", "only text types can be declared"},
		{"not a media type", "html-pdf", "html", prose, "", "not a media type"},
	} {
		r, err := render.Lookup(tc.renderer)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := r.PrepareTyped(tc.in, tc.declared, nil, nil)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: accepted as %s, want a refusal", tc.name, plan.InputType)
		case tc.want == "" && (!errors.Is(err, render.ErrUnsupportedInput) || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: err = %v, want unsupported input saying %q", tc.name, err, tc.says)
		case tc.want != "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && plan.InputType != tc.want:
			t.Errorf("%s: input type %s, want %s", tc.name, plan.InputType, tc.want)
		}
	}
	// The refusal says what was seen.
	r, _ := render.Lookup("html-pdf")
	_, err := r.PrepareTyped(prose, "", nil, nil)
	if err == nil || !strings.Contains(err.Error(), `"Quarterly report: revenu"…`) {
		t.Errorf("refusal %v does not quote the input's first bytes", err)
	}
}

func TestOptionErrorsSayWhatWasSent(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("pdf-png")
	for opts, want := range map[string]string{
		`{"dpi": "150"}`:         `got "150" (a string), want a number`,
		`{"format": 3}`:          `got 3 (a number), want a string`,
		`{"dpi": true}`:          `got true (a boolean), want a number`,
		`{"first_page": [1]}`:    `got an array, want a number`,
		`{"format": {"a": "b"}}`: `got an object, want a string`,
	} {
		_, err := r.PrepareJSON(samples.PDF("x", 1), []byte(opts), nil)
		if !errors.Is(err, render.ErrInvalidOptions) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", opts, err, want)
		}
	}
}
