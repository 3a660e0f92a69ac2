//go:build !unit

package render_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"strings"
	"testing"

	_ "golang.org/x/image/webp"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

func zipWrite(w io.Writer, name string) {
	zw := zip.NewWriter(w)
	f, _ := zw.Create(name)
	_, _ = f.Write([]byte("hello"))
	_ = zw.Close()
}

func encodePNG(img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func encodeJPEG(img image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// renderOK renders input with the named renderer in a real sandbox and
// returns the outputs by their published names.
//
// A sandbox that was gone before the job reached it (sandbox_failure,
// ErrNotDelivered) says nothing of the renderer; the queue retries such a
// job (docs/design.md), and so does renderOK, once, in a new sandbox.
func renderOK(t *testing.T, m *sandbox.Manager, name string, input []byte, opts map[string]any) (map[string][]byte, *wire.Result) {
	t.Helper()
	r, plan := mustPlan(t, name, input, opts)
	res, err := m.Run(context.Background(), plan.Job)
	if sandbox.OutcomeOf(err) == sandbox.SandboxFailure && errors.Is(err, sandbox.ErrNotDelivered) {
		t.Logf("%s: %v; running it again in a new sandbox, as the queue would", name, err)
		plan.Job.Input = bytes.NewReader(input)
		res, err = m.Run(context.Background(), plan.Job)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return accepted(t, r, res.Response.Files), &res.Response.Result
}

// accepted checks what a sandbox returned as the worker does and returns
// the outputs by their published names.
func accepted(t *testing.T, r *render.Renderer, files []wire.File) map[string][]byte {
	t.Helper()
	outs, err := r.AcceptOutputs(files)
	if err != nil {
		t.Fatalf("%s: %v", r.Name, err)
	}
	m := map[string][]byte{}
	for _, o := range outs {
		m[o.Name] = o.Data
	}
	return m
}

// mustPlan prepares a job of the named renderer, its input set.
func mustPlan(t *testing.T, name string, input []byte, opts map[string]any) (*render.Renderer, *render.Plan) {
	t.Helper()
	r, err := render.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Prepare(input, opts, render.LimitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	plan.Job.Input = bytes.NewReader(input)
	return r, plan
}

// shellFiles runs script with /bin/sh in a sandbox of m (a pdf-png job's,
// its steps replaced; maxFiles 0 keeps the job's limit) and returns the
// files it left in /tmp/out by name.
func shellFiles(t *testing.T, m *sandbox.Manager, script string, maxFiles int) map[string]string {
	t.Helper()
	_, plan := mustPlan(t, "pdf-png", samples.PDF("shell", 1), nil)
	plan.Job.Request.Steps = []wire.Step{{Argv: []string{"/bin/sh", "-c", script}}}
	if maxFiles > 0 {
		plan.Job.Request.MaxOutputFiles = maxFiles
	}
	res, err := m.Run(context.Background(), plan.Job)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range res.Response.Files {
		files[f.Name] = string(f.Data)
	}
	return files
}

func pdfText(t *testing.T, m *sandbox.Manager, pdf []byte) string {
	return testenv.PDFText(t, m, pdf)
}

// pdfInfo returns pdfinfo's "Key: value" lines as a map.
func pdfInfo(t *testing.T, m *sandbox.Manager, pdf []byte) map[string]string {
	info := map[string]string{}
	for _, line := range strings.Split(testenv.Tool(t, m, "pdfinfo", pdf), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			info[k] = strings.TrimSpace(v)
		}
	}
	return info
}

func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("output does not decode as an image: %v", err)
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

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
