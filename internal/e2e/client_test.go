//go:build !unit

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rb "github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/jobstate"
)

// Package client against the real stack: a page with its stylesheet as
// two files, waited for and downloaded with its digest checked; the list
// iterator across pages; cancel; a refusal as a typed error; submissions
// past the rate limit retried with one idempotency key each (no job made
// twice); a webhook verified, and a tampered one refused.
func TestClient(t *testing.T) {
	rcv := newHookReceiver(t)
	s := newStack(t, stackOpts{apiArgs: []string{"-webhook-allow", "127.0.0.2/32", "-rate", "2", "-burst", "2"}})
	key := s.key("client")
	c := s.sdk(key) // its traffic checked against openapi.yaml
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	page := []byte(`<!doctype html><html><head><link rel="stylesheet" href="css/style.css"></head><body><h1>Quarterly figures</h1></body></html>`)
	css := []byte(`h1 { color: rgb(200, 0, 0); font-size: 40px }`)
	j, err := c.Submit(ctx, rb.Request{Renderer: "html-pdf", Files: []rb.File{
		rb.FromBytes("index.html", page), rb.FromBytes("css/style.css", css)}, OutputName: "figures"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []jobstate.State
	j, err = c.Wait(ctx, j.ID, func(j *rb.Job) { seen = append(seen, j.State) })
	if err != nil || j.State != "succeeded" {
		t.Fatalf("Wait: %+v %v (saw %v)", j, err, seen)
	}
	dir := t.TempDir()
	paths, err := c.DownloadAll(ctx, j, dir)
	if err != nil || len(paths) != 1 || filepath.Base(paths[0]) != "figures.pdf" {
		t.Fatalf("DownloadAll: %v %v", paths, err)
	}
	pdf, _ := os.ReadFile(paths[0])
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) || !strings.Contains(hostTool(t, "pdftotext", pdf), "Quarterly figures") {
		t.Errorf("the downloaded PDF is not the page")
	}
	if img := rasterAt96(t, pdf); !hasColor(img, 200, 0, 0) {
		t.Errorf("the page's stylesheet (the second file) did not apply: no red heading")
	}
	// A digest that does not match is an error, not a file.
	bad := *j
	bad.Outputs = append([]rb.Output(nil), j.Outputs...)
	bad.Outputs[0].SHA256 = strings.Repeat("0", 64)
	if _, err := c.DownloadAll(ctx, &bad, t.TempDir()); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("a download that fails its digest: %v", err)
	}

	// Past the rate limit (2/s, burst 2): every submission is accepted,
	// after 429s honoured, each once.
	var wg sync.WaitGroup
	ids := make([]string, 6)
	for i := range ids {
		wg.Go(func() {
			j, err := c.Submit(ctx, rb.Request{Renderer: "svg-png", Files: []rb.File{rb.FromBytes("in.svg", samples.SVG(30+i, 30, 0, 0, 5))}})
			if err != nil {
				t.Errorf("submit %d: %v", i, err)
				return
			}
			ids[i] = j.ID
		})
	}
	wg.Wait()
	if !strings.Contains(scrape(t, s.metrics), `status="429"`) {
		t.Errorf("no submission met the rate limit: the retries above were not exercised")
	}
	listed := map[string]int{}
	for j, err := range c.Jobs(ctx, rb.ListOptions{Limit: 2}) { // pages of two
		if err != nil {
			t.Fatal(err)
		}
		listed[j.ID]++
	}
	if len(listed) != 7 {
		t.Errorf("the iterator listed %d jobs, want 7: %v", len(listed), listed)
	}
	for _, id := range ids {
		if listed[id] != 1 {
			t.Errorf("job %s listed %d times", id, listed[id])
		}
	}

	// A refusal is a *rb.Error with the problem's code.
	_, err = c.Submit(ctx, rb.Request{Renderer: "svg-pdfx", Files: []rb.File{rb.FromBytes("in.svg", samples.SVG(10, 10, 0, 0, 1))}})
	var apiErr *rb.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Code != "unknown_renderer" {
		t.Errorf("an unknown renderer: %v, want a 400 unknown_renderer *rb.Error", err)
	}

	// Cancel a job that waits (it sleeps in its page).
	slow, err := c.Submit(ctx, rb.Request{Renderer: "html-pdf", Files: []rb.File{rb.FromBytes("p.html", samples.HTML("Slow", "page"))},
		Options: map[string]any{"wait_delay": 20}})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := c.Cancel(ctx, slow.ID); err != nil || j.State != "canceled" {
		t.Errorf("Cancel: %+v %v", j, err)
	}

	// A webhook, verified with the key's secret; tampered, refused.
	secret, err := c.WebhookSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hooked, err := c.Submit(ctx, rb.Request{Renderer: "svg-png", Files: []rb.File{rb.FromBytes("in.svg", samples.SVG(20, 20, 0, 0, 5))},
		CallbackURL: rcv.answer("/client")})
	if err != nil {
		t.Fatal(err)
	}
	webhookOf(t, s.client, key, hooked.ID)
	d := rcv.deliveries("/client")
	if len(d) != 1 {
		t.Fatalf("%d deliveries, want 1", len(d))
	}
	ev, err := rb.VerifyWebhook(secret, d[0].header, d[0].body)
	if err != nil || ev.Type != "job.succeeded" || ev.Data.ID != hooked.ID || len(ev.Data.Outputs) != 1 {
		t.Errorf("VerifyWebhook: %+v %v", ev, err)
	}
	if _, err := rb.VerifyWebhook(secret, d[0].header, bytes.Replace(d[0].body, []byte("succeeded"), []byte("failed"), 1)); err == nil {
		t.Errorf("a tampered webhook was verified")
	}
}

// The CLI renders a file end to end against the real stack, from the
// environment or a config file, and exits 2 with its usage on a wrong
// command line, 3 on a failed job, 4 on a refused request.
func TestCLI(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key("cli")
	dir := t.TempDir()
	svg := filepath.Join(dir, "logo.svg")
	if err := os.WriteFile(svg, samples.SVG(64, 32, 0, 0, 5), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "config.json")
	if err := os.WriteFile(conf, []byte(`{"server": "`+s.base+`", "key_file": "`+keyFile+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(env []string, args ...string) (stdout, stderr string, code int) {
		return runCLI(t, append([]string{"RENDERBOX_CONFIG=" + filepath.Join(dir, "none.json"), "RENDERBOX_SERVER=", "RENDERBOX_KEY="}, env...), args...)
	}
	fromEnv := []string{"RENDERBOX_SERVER=" + s.base, "RENDERBOX_KEY=" + key}

	out := filepath.Join(dir, "out")
	stdout, stderr, code := cli(fromEnv, "render", "-r", "svg-png", "-opt", "width=128", "-o", out, svg)
	if code != 0 {
		t.Fatalf("renderbox render: exit %d\n%s%s", code, stdout, stderr)
	}
	png := strings.TrimSpace(stdout)
	b, err := os.ReadFile(png)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) || filepath.Dir(png) != out {
		t.Fatalf("renderbox render printed %q (%v); want a PNG in %s", png, err, out)
	}
	if w := pngWidth(t, b); w != 128 {
		t.Errorf("the PNG is %d wide, want 128 (-opt width=128)", w)
	}
	if !strings.Contains(stderr, ": queued") && !strings.Contains(stderr, ": running") || !strings.Contains(stderr, ": succeeded") {
		t.Errorf("no progress on stderr: %q", stderr)
	}

	// The same from the config file; then the job in the listing and as JSON.
	if _, stderr, code := cli([]string{"RENDERBOX_CONFIG=" + conf}, "render", "-r", "svg-png", "-o", filepath.Join(dir, "out2"), svg); code != 0 {
		t.Fatalf("renderbox render from the config file: exit %d: %s", code, stderr)
	}
	ls, _, code := cli(fromEnv, "jobs", "ls")
	lines := strings.Split(strings.TrimSpace(ls), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "succeeded") {
		t.Fatalf("renderbox jobs ls: exit %d\n%s", code, ls)
	}
	id := strings.Fields(lines[1])[0]
	got, _, code := cli(fromEnv, "jobs", "get", id)
	var j struct {
		ID, State string
	}
	if code != 0 || json.Unmarshal([]byte(got), &j) != nil || j.ID != id || j.State != "succeeded" {
		t.Errorf("renderbox jobs get: exit %d\n%s", code, got)
	}
	if rs, _, code := cli(fromEnv, "renderers"); code != 0 || !strings.Contains(rs, "svg-png") || !strings.Contains(rs, "html-pdf") {
		t.Errorf("renderbox renderers: exit %d\n%s", code, rs)
	}

	// A corrupt PDF fails its job: exit 1, saying why.
	corrupt := filepath.Join(dir, "broken.pdf")
	_ = os.WriteFile(corrupt, append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0xde, 0xad}, 200)...), 0o600)
	if _, stderr, code := cli(fromEnv, "render", "-r", "pdf-png", "-o", out, corrupt); code != 3 || !strings.Contains(stderr, "render_failed") {
		t.Errorf("a failed job: exit %d, %q; want 3 naming render_failed", code, stderr)
	}
	// A refused request: 4.
	if _, stderr, code := cli(fromEnv, "render", "-r", "svg-pdfx", svg); code != 4 || !strings.Contains(stderr, "unknown_renderer") {
		t.Errorf("a refused request: exit %d, %q; want 4", code, stderr)
	}
	// Wrong command lines: exit 2 with the usage, nothing sent.
	if _, stderr, code := cli(fromEnv, "render", svg); code != 2 || !strings.Contains(stderr, "want -r RENDERER") {
		t.Errorf("renderbox render FILE: exit %d, %q; want 2", code, stderr)
	}
	for _, args := range [][]string{{}, {"nonsense"}, {"jobs"}, {"jobs", "get"}, {"jobs", "get", "a", "b"}} {
		if _, stderr, code := cli(fromEnv, args...); code != 2 || !strings.Contains(stderr, "usage: renderbox") {
			t.Errorf("renderbox %q: exit %d, %q; want 2 with the usage", args, code, stderr)
		}
	}
	if _, stderr, code := cli(nil, "jobs", "ls"); code != 1 || !strings.Contains(stderr, "no server") {
		t.Errorf("without a server: exit %d, %q", code, stderr)
	}
}

// hasColor reports whether any pixel of img is near (r, g, b).
func hasColor(img image.Image, r, g, b int) bool {
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			if rgbIs(img.At(x, y), r, g, b) {
				return true
			}
		}
	}
	return false
}

func pngWidth(t *testing.T, b []byte) int {
	t.Helper()
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Width
}

// runCLI runs the built renderbox with args and env added to this
// process's environment, and returns its output and exit code.
func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins, "renderbox"), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}
