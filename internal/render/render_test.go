package render_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
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
		{"pdf", samples.PDF("x", 1), "application/pdf"},
		{"svg with declaration", samples.SVG(10, 10, 1, 1, 2), "image/svg+xml"},
		{"bare svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), "image/svg+xml"},
		{"svg with doctype subset", []byte("<?xml version=\"1.0\"?>\n<!DOCTYPE svg [<!ENTITY a \"b\">]>\n<!-- c -->\n<svg>"), "image/svg+xml"},
		{"html", samples.HTML("a", "b"), "text/html"},
		{"html fragment", []byte("<h1>hi</h1>"), "text/html"},
		{"svgfoo is not svg", []byte("<svgfoo/>"), "text/plain"},
		{"png", []byte("\x89PNG\r\n\x1a\n0000"), "image/png"},
		{"empty", nil, "application/x-empty"},
		{"text", []byte("just words"), "text/plain"},
	} {
		if got := render.Sniff(tc.in); got != tc.want {
			t.Errorf("%s: Sniff = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPrepareRejectsBeforeAnySandbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		renderer string
		in       []byte
		opts     map[string]any
		want     error
	}{
		{"pdf-png", samples.HTML("a", "b"), nil, render.ErrUnsupportedInput},
		{"svg-png", samples.PDF("a", 1), nil, render.ErrUnsupportedInput},
		{"html-pdf", samples.SVG(1, 1, 0, 0, 1), nil, render.ErrUnsupportedInput},
		{"html-pdf", nil, nil, render.ErrUnsupportedInput},
		{"pdf-png", samples.PDF("a", 1), map[string]any{"dpi": 150000}, render.ErrInvalidOptions},
		{"svg-png", samples.SVG(1, 1, 0, 0, 1), map[string]any{"bogus": true}, render.ErrInvalidOptions},
		{"svg-png", append(samples.SVG(1, 1, 0, 0, 1), make([]byte, 11<<20)...), nil, render.ErrInputTooLarge},
	} {
		r, err := render.Lookup(tc.renderer)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Prepare(tc.in, tc.opts)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Prepare = %v, want %v", tc.renderer, err, tc.want)
		}
	}
	if _, err := render.Lookup("exe-shell"); !errors.Is(err, render.ErrUnknownRenderer) {
		t.Errorf("Lookup(exe-shell) = %v, want ErrUnknownRenderer", err)
	}
}

func TestOptionErrorNamesTheOption(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("svg-png")
	_, err := r.Prepare(samples.SVG(1, 1, 0, 0, 1), map[string]any{"zoomz": 2})
	if err == nil || !strings.Contains(err.Error(), `"zoomz"`) {
		t.Errorf("error %v does not name the unknown option", err)
	}
}

// run renders input with the named renderer in a real sandbox.
func run(t *testing.T, m *sandbox.Manager, name string, input []byte) map[string][]byte {
	t.Helper()
	r, err := render.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Prepare(input, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan.Job.Input = bytes.NewReader(input)
	res, err := m.Run(context.Background(), plan.Job)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out := map[string][]byte{}
	for _, f := range res.Response.Files {
		out[r.OutputName(f.Name)] = f.Data
	}
	return out
}

func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("output is not a PNG: %v", err)
	}
	return img
}

func isRed(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r > 0xe000 && g < 0x2000 && b < 0x2000
}

func isWhite(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r > 0xf000 && g > 0xf000 && b > 0xf000
}

func TestSVGToPNG(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	out := run(t, m, "svg-png", samples.SVG(200, 100, 120, 20, 40))
	img := decodePNG(t, out["output.png"])
	if b := img.Bounds(); b.Dx() != 200 || b.Dy() != 100 {
		t.Fatalf("PNG is %dx%d, want 200x100", b.Dx(), b.Dy())
	}
	for _, p := range []image.Point{{121, 21}, {140, 40}, {158, 58}} {
		if c := img.At(p.X, p.Y); !isRed(c) {
			t.Errorf("pixel %v = %v, want red", p, c)
		}
	}
	for _, p := range []image.Point{{5, 5}, {100, 50}, {165, 65}, {195, 95}} {
		if c := img.At(p.X, p.Y); !isWhite(c) {
			t.Errorf("pixel %v = %v, want white", p, c)
		}
	}
}

func TestPDFToPNG(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	pages := 3
	out := run(t, m, "pdf-png", samples.PDF("renderbox", pages))
	if len(out) != pages {
		t.Fatalf("got outputs %v, want page-1.png … page-%d.png", keys(out), pages)
	}
	for i := 1; i <= pages; i++ {
		b, ok := out[fmt.Sprintf("page-%d.png", i)]
		if !ok {
			t.Fatalf("no page-%d.png in %v", i, keys(out))
		}
		img := decodePNG(t, b)
		// US Letter at 150 dpi.
		if bd := img.Bounds(); bd.Dx() != 1275 || bd.Dy() != 1650 {
			t.Errorf("page %d is %dx%d, want 1275x1650", i, bd.Dx(), bd.Dy())
		}
		// The text sits 1 inch from the left, 92 pt from the top.
		dark := 0
		for y := 170; y < 200; y++ {
			for x := 150; x < 500; x++ {
				if r, _, _, _ := img.At(x, y).RGBA(); r < 0x4000 {
					dark++
				}
			}
		}
		if dark < 200 {
			t.Errorf("page %d: %d dark pixels where the text should be, want some", i, dark)
		}
	}
}

func TestHTMLToPDF(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	out := run(t, m, "html-pdf", samples.HTML("Quarterly report", "Rendered inside gVisor by renderbox."))
	pdf := out["output.pdf"]
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		t.Fatalf("output.pdf starts with %q, want %%PDF-", pdf[:min(len(pdf), 16)])
	}
	// Extract the text in another sandbox: parsing output is untrusted work.
	text := pdfText(t, m, pdf)
	for _, want := range []string{"Quarterly report", "Rendered inside gVisor by renderbox."} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext of the output = %q, want it to contain %q", text, want)
		}
	}
}

func pdfText(t *testing.T, m *sandbox.Manager, pdf []byte) string {
	t.Helper()
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{
			Mode: wire.ModeRender, InputName: "in.pdf", InputSize: int64(len(pdf)),
			Argv: []string{"/usr/bin/pdftotext", "-layout", wire.InputDir + "/in.pdf", wire.OutputDir + "/text.txt"},
			Env:  []string{"PATH=/usr/bin:/bin"},
		},
		Input: bytes.NewReader(pdf),
	})
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	return string(res.Response.Files[0].Data)
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
