//go:build !unit

package render_test

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

var (
	pdfBytes = samples.PDF("x", 1)
	pngBytes = encodePNG(image.NewRGBA(image.Rect(0, 0, 4, 4)))
)

// What a subverted sandbox might send back, each refused whole: nothing of
// such a set is published.
func TestAcceptOutputsRefusesWhatTheRendererDoesNotMake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		renderer string
		files    []wire.File
		why      string
	}{
		{"html-pdf", []wire.File{{Name: "evil.html", Data: []byte("<script>")}}, "no file named"},
		{"dot-svg", []wire.File{{Name: `a";x=1.svg`, Data: []byte("<svg/>")}}, "no file named"},
		{"html-pdf", []wire.File{{Name: "invoice\u202Efdp.exe", Data: pdfBytes}}, "no file named"},
		{"html-pdf", []wire.File{{Name: "output.pdf", Data: pdfBytes}, {Name: "output.pdf.1", Data: pdfBytes}}, "at most 1"},
		{"pdf-png", []wire.File{{Name: "page-01.png", Data: pngBytes}, {Name: "page-1.png", Data: pngBytes}}, "is page-1.png again"},
		{"pdf-png", []wire.File{{Name: "page-0.png", Data: pngBytes}}, "no file named"},
		{"svg-png", []wire.File{{Name: "output.png", Data: pdfBytes}}, "is not image/png"},
		{"html-pdf", []wire.File{{Name: "output.pdf", Data: []byte("<html>%PDF-")}}, "is not application/pdf"},
		{"markdown-html", []wire.File{{Name: "output.html", Data: []byte("a\x00b")}}, "is not text/html"},
		{"sandbox-probe", []wire.File{{Name: "escapes.json", Data: []byte("{")}}, "is not application/json"},
		{"html-pdf", nil, "no output"},
		{"pdf-split", []wire.File{{Name: "split-1.pdf", Data: pdfBytes}, {Name: "split-01-05.pdf", Data: pdfBytes}}, "the same number"},
		{"pdf-split", []wire.File{{Name: "split-1.pdf.exe", Data: pdfBytes}}, "no file named"},
		{"pdf-metadata", []wire.File{{Name: "metadata.json", Data: []byte("{")}}, "is not application/json"},
	} {
		r, err := render.LookupWithDiagnostics(tc.renderer)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := r.AcceptOutputs(tc.files)
		if !errors.Is(err, render.ErrBadOutput) || !strings.Contains(err.Error(), tc.why) || outs != nil {
			t.Errorf("%s %v: %v, %d outputs; want ErrBadOutput saying %q", tc.renderer, names(tc.files), err, len(outs), tc.why)
		}
	}
	// Too many pages: more than pdf-png's page bound.
	r, _ := render.Lookup("pdf-png")
	var many []wire.File
	for i := 1; i <= r.MaxPages+1; i++ {
		many = append(many, wire.File{Name: fmt.Sprintf("page-%03d.png", i), Data: pngBytes})
	}
	if _, err := r.AcceptOutputs(many); !errors.Is(err, render.ErrBadOutput) {
		t.Errorf("%d pages: %v, want ErrBadOutput", len(many), err)
	}
}

func TestAcceptOutputsPublishesNamesAndTypesFromTheRenderer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		renderer string
		files    []wire.File
		want     []render.Output
	}{
		{"pdf-png", []wire.File{{Name: "page-01.png", Data: pngBytes}, {Name: "page-02.png", Data: pngBytes}},
			[]render.Output{{Name: "page-1.png", MediaType: render.TypePNG}, {Name: "page-2.png", MediaType: render.TypePNG}}},
		{"office-pdf", []wire.File{{Name: "input.pdf", Data: pdfBytes}}, []render.Output{{Name: "output.pdf", MediaType: render.TypePDF}}},
		{"markdown-html", []wire.File{{Name: "output.html", Data: []byte("<!doctype html><p>é</p>")}},
			[]render.Output{{Name: "output.html", MediaType: "text/html; charset=utf-8"}}},
	} {
		r, _ := render.Lookup(tc.renderer)
		outs, err := r.AcceptOutputs(tc.files)
		if err != nil || len(outs) != len(tc.want) {
			t.Fatalf("%s: %v, %v", tc.renderer, outs, err)
		}
		for i, o := range outs {
			if o.Name != tc.want[i].Name || o.MediaType != tc.want[i].MediaType || len(o.Data) == 0 {
				t.Errorf("%s: output %d = %s %s, want %s %s", tc.renderer, i, o.Name, o.MediaType, tc.want[i].Name, tc.want[i].MediaType)
			}
		}
	}
}

func TestCheckOutputName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "report", "Q3_report-v1.2", "a", "-x", strings.Repeat("n", render.MaxOutputName)} {
		if err := render.CheckOutputName(name); err != nil {
			t.Errorf("CheckOutputName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{".hidden", "..", "a/b", `a\b`, "a b", "a;b", `a"b`, "é", "a\x00", "a\n", "report\u202Efdp",
		strings.Repeat("n", render.MaxOutputName+1)} {
		if err := render.CheckOutputName(name); !errors.Is(err, render.ErrBadOutputName) {
			t.Errorf("CheckOutputName(%q) = %v, want ErrBadOutputName", name, err)
		}
	}
}

// The client's output_name renames outputs after they were accepted under
// the renderer's own names.
func TestNameOutputs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		renderer, base string
		names, want    []string
	}{
		{"html-pdf", "report", []string{"output.pdf"}, []string{"report.pdf"}},
		{"image-thumbnail", "q3.v2", []string{"thumbnail.webp"}, []string{"q3.v2.webp"}},
		{"office-pdf", "letter", []string{"output.pdf"}, []string{"letter.pdf"}},
		{"pdf-png", "scan", []string{"page-1.png", "page-2.png", "page-10.png"}, []string{"scan-1.png", "scan-2.png", "scan-10.png"}},
		{"pdf-png", "scan", []string{"page-1.jpg"}, []string{"scan-1.jpg"}}, // one page of a multi-file renderer keeps its number
		{"pdf-png", "", []string{"page-1.png"}, []string{"page-1.png"}},
	} {
		r, _ := render.Lookup(tc.renderer)
		var outs []render.Output
		for _, n := range tc.names {
			outs = append(outs, render.Output{Name: n, MediaType: "m", Data: []byte(n)})
		}
		named, err := r.NameOutputs(outs, tc.base)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.renderer, tc.base, err)
		}
		for i, o := range named {
			if o.Name != tc.want[i] || string(o.Data) != tc.names[i] || o.MediaType != "m" {
				t.Errorf("%s %q: output %d = %s, want %s with its bytes and type", tc.renderer, tc.base, i, o.Name, tc.want[i])
			}
		}
		if outs[0].Name != tc.names[0] {
			t.Errorf("%s %q: NameOutputs changed its argument", tc.renderer, tc.base)
		}
	}
	r, _ := render.Lookup("html-pdf")
	if named, err := r.NameOutputs([]render.Output{{Name: "output.pdf"}}, "../x"); !errors.Is(err, render.ErrBadOutputName) || named != nil {
		t.Errorf("NameOutputs with ../x = %v, %v; want ErrBadOutputName and nothing", named, err)
	}
}

// Every renderer, the diagnostic ones included, has an output rule.
func TestEveryRendererHasAnOutputRule(t *testing.T) {
	t.Parallel()
	for _, name := range append(render.Names(), "sandbox-probe") {
		r, _ := render.LookupWithDiagnostics(name)
		if _, err := r.AcceptOutputs([]wire.File{{Name: "\x00", Data: nil}}); err == nil || strings.Contains(err.Error(), "no output rule") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func names(fs []wire.File) []string {
	var n []string
	for _, f := range fs {
		n = append(n, f.Name)
	}
	return n
}

// From a real sandbox: a "renderer" that writes what a subverted one might
// (a forbidden name, a duplicate after normalisation, a PDF named .png) is
// refused as a whole.
func TestSubvertedSandboxOutputsAreRefused(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	for _, tc := range []struct{ renderer, script string }{
		{"html-pdf", `printf '%%PDF-1.4' > /tmp/out/output.pdf; echo '<script>' > /tmp/out/evil.html`},
		{"pdf-png", `printf '\211PNG\r\n\032\n' > /tmp/out/page-01.png; cp /tmp/out/page-01.png /tmp/out/page-1.png`},
		{"svg-png", `printf '%%PDF-1.4' > /tmp/out/output.png`},
	} {
		res, err := m.Run(context.Background(), sandbox.Job{Request: wire.Request{
			Mode: wire.ModeRender, Argv: []string{"/bin/sh", "-c", tc.script}, Env: []string{"PATH=/usr/bin:/bin"}, InputName: "input",
		}})
		if err != nil {
			t.Fatalf("%s: %v", tc.renderer, err)
		}
		r, _ := render.Lookup(tc.renderer)
		if outs, err := r.AcceptOutputs(res.Response.Files); !errors.Is(err, render.ErrBadOutput) || outs != nil {
			t.Errorf("%s: sandbox sent %v; accepted %d, %v; want ErrBadOutput", tc.renderer, names(res.Response.Files), len(outs), err)
		} else {
			t.Logf("%s: %v", tc.renderer, err)
		}
	}
}
