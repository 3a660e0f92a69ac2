//go:build !unit

package e2e

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rb "github.com/renderbox/renderbox/client"
)

// writeSite writes a page whose stylesheet (a red heading) and image (a
// blue square) live in subdirectories, as a site is laid out.
func writeSite(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "site")
	logo := image.NewRGBA(image.Rect(0, 0, 80, 80))
	for y := range 80 {
		for x := range 80 {
			logo.Set(x, y, color.RGBA{0, 0, 200, 255})
		}
	}
	var pngb bytes.Buffer
	if err := png.Encode(&pngb, logo); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"index.html":    []byte(`<!doctype html><html><head><link rel="stylesheet" href="css/style.css"></head><body><h1>Site heading</h1><img src="img/logo.png" width="80" height="80"></body></html>`),
		"css/style.css": []byte(`h1 { color: rgb(200, 0, 0); font-size: 48px }`),
		"img/logo.png":  pngb.Bytes(),
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkSitePDF wants the site's PDF with its stylesheet applied (red
// heading) and its image drawn (blue square).
func checkSitePDF(t *testing.T, how string, pdf []byte) {
	t.Helper()
	img := rasterAt96(t, pdf)
	if !hasColor(img, 200, 0, 0) {
		t.Errorf("%s: no red heading: the stylesheet css/style.css was not applied", how)
	}
	if !hasColor(img, 0, 0, 200) {
		t.Errorf("%s: no blue square: the image img/logo.png was not drawn", how)
	}
}

// The package's Examples against the real stack (they run against an
// in-process stand-in otherwise), then a site from nested paths through
// the client, and a failed job as a *JobError.
func TestClientExamples(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key("examples")
	cmd := exec.Command("go", "test", "-count=1", "-run", "^Example", "-v", "github.com/renderbox/renderbox/client")
	cmd.Env = append(os.Environ(), "RENDERBOX_EXAMPLE_SERVER="+s.base, "RENDERBOX_EXAMPLE_KEY="+key)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Count(string(out), "--- PASS: Example") != 3 {
		t.Errorf("the client's Examples against the stack: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := s.sdk(key)
	site := writeSite(t)
	// From nested paths, relative to the working directory.
	t.Chdir(site)
	j, err := c.Submit(ctx, rb.Request{Renderer: "html-pdf", Files: []rb.File{
		rb.FromPath("index.html"), rb.FromPath("css/style.css"), rb.FromPath("img/logo.png")}})
	if err == nil {
		j, err = c.Wait(ctx, j.ID, nil)
	}
	if err != nil || len(j.Diagnostics) != 0 {
		t.Fatalf("the site through the client: %v %s", err, j.Diagnostics)
	}
	dir := t.TempDir()
	paths, err := c.DownloadAll(ctx, j, dir)
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := os.ReadFile(paths[0])
	checkSitePDF(t, "client.FromPath", pdf)
	tree, err := rb.FromDir(site)
	if err != nil {
		t.Fatal(err)
	}
	if j, err = c.Submit(ctx, rb.Request{Renderer: "html-pdf", Files: tree}); err == nil {
		j, err = c.Wait(ctx, j.ID, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if paths, err = c.DownloadAll(ctx, j, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	pdf, _ = os.ReadFile(paths[0])
	checkSitePDF(t, "client.FromDir", pdf)

	// A failed job: Wait returns it with a *JobError naming its code.
	j, err = c.Submit(ctx, rb.Request{Renderer: "pdf-png", Files: []rb.File{rb.FromBytes("broken.pdf", append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0xde, 0xad}, 200)...))}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Wait(ctx, j.ID, nil)
	var jobErr *rb.JobError
	if !errors.As(err, &jobErr) || jobErr.Code != "render_failed" || got == nil || got.State != "failed" {
		t.Errorf("Wait on a failed job: %+v %v, want the job and a *JobError render_failed", got, err)
	}
}

// renderbox render -r html-pdf site/ sends the directory as its tree:
// the PDF has the stylesheet applied and the image drawn, with no
// warning; the progress shows the job running in its sandbox, the
// sandbox's mode named, before it succeeds.
func TestCLISite(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key("cli-site")
	site := writeSite(t)
	out := filepath.Join(t.TempDir(), "out")
	run := func(dir string, args ...string) (string, string, int) {
		cmd := exec.Command(filepath.Join(bins, "renderbox"), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RENDERBOX_CONFIG=/nonexistent", "RENDERBOX_SERVER="+s.base, "RENDERBOX_KEY="+key)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
	// wait_delay keeps the job running long enough to be seen so.
	stdout, stderr, code := run(filepath.Dir(site), "render", "-r", "html-pdf", "site/", "-o", out, "-strict", "-opt", "wait_delay=2")
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("renderbox render -r html-pdf site/: exit %d\n%s%s", code, stdout, stderr)
	}
	// The worker reports the sandbox it took while the page waits: the
	// job is seen running in it, its mode named, before it succeeds.
	running := regexp.MustCompile(`: running \((cold|pre-booted|restored) sandbox\) after \d+\.\ds\n`).FindStringIndex(stderr)
	succeeded := regexp.MustCompile(`: succeeded \((cold|pre-booted|restored) sandbox\) after \d+\.\ds\n`).FindStringIndex(stderr)
	t.Logf("renderbox render -r html-pdf site/ printed:\n%s", stderr)
	if !strings.Contains(stderr, ": queued after") || running == nil || succeeded == nil || running[0] > succeeded[0] {
		t.Errorf("progress %q: want queued, then running (MODE sandbox), then succeeded (MODE sandbox), each after its seconds", stderr)
	}
	pdf, err := os.ReadFile(strings.TrimSpace(stdout))
	if err != nil {
		t.Fatal(err)
	}
	checkSitePDF(t, "renderbox render site/", pdf)

	// The same as three files from inside the site; without the image, a
	// warning naming it (exit 0), and with -strict exit 6.
	stdout, stderr, code = run(site, "render", "-r", "html-pdf", "index.html", "css/style.css", "img/logo.png", "-o", out)
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("three files: exit %d\n%s%s", code, stdout, stderr)
	}
	if pdf, err = os.ReadFile(strings.TrimSpace(stdout)); err != nil {
		t.Fatal(err)
	}
	checkSitePDF(t, "renderbox render index.html css/style.css img/logo.png", pdf)
	if _, stderr, code := run(site, "render", "-r", "html-pdf", "index.html", "css/style.css", "-o", out, "-strict"); code != 6 || !strings.Contains(stderr, "img/logo.png") {
		t.Errorf("a missing image with -strict: exit %d %q, want 6 naming img/logo.png", code, stderr)
	}
}
