//go:build !unit

package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/jpeg"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// A chain through the API: office-pdf then pdf-protect, each in a fresh
// sandbox; the job lists both steps, shows the password redacted, and its
// output is the protected PDF of the document. A chain whose steps do not
// fit is refused at the door.
func TestChainThroughTheAPI(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	s := newStack(t, stackOpts{})
	c, key := s.client, s.key("chain")
	_, j := submitFields(t, c, key, "office-pdf", samples.DOCX("Quarterly harvest report"), map[string]any{
		"options": map[string]any{"landscape": true},
		"then":    []any{map[string]any{"renderer": "pdf-protect", "options": map[string]any{"owner_password": "owner pw", "user_password": "user pw"}}},
	}, "?wait=60", nil)
	if j.Renderer != "office-pdf|pdf-protect" {
		t.Errorf("the chain's job shows renderer %q, want office-pdf|pdf-protect", j.Renderer)
	}
	waitFor(t, "the chain's job to end", 5*time.Minute, func() bool { j = getJob(t, c, key, j.ID, ""); return j.terminal() })
	if j.State != "succeeded" || len(j.Outputs) != 1 || j.Outputs[0].Name != "output.pdf" {
		t.Fatalf("chain: job %s %+v, outputs %+v; want succeeded with output.pdf", j.State, j.Error, j.Outputs)
	}
	if j.Options["pdf-protect.owner_password"] != render.Redacted || j.Options["pdf-protect.user_password"] != render.Redacted || j.Options["office-pdf.landscape"] != true {
		t.Errorf("the job shows options %v, want the passwords redacted", j.Options)
	}
	if got, want := fmt.Sprint(stepsOf(t, c, key, j.ID)), "[office-pdf succeeded pdf-protect succeeded]"; got != want {
		t.Errorf("the job's steps %s, want %s", got, want)
	}
	out := c.do("GET", j.Outputs[0].URL, key, "", nil, nil).Body
	// Locked: pdf-unlock without the password fails, with it gives the
	// document back.
	_, u := submitJSON(t, c, key, "pdf-unlock", out, nil, "?wait=60", nil)
	if u.State != "failed" || u.Error == nil || !strings.Contains(u.Error.Message, "invalid password") {
		t.Errorf("pdf-unlock of the chain's PDF without its password: %s %+v, want render_failed, invalid password", u.State, u.Error)
	}
	_, u = submitJSON(t, c, key, "pdf-unlock", out, map[string]any{"password": "user pw"}, "?wait=60", nil)
	if u.State != "succeeded" || len(u.Outputs) != 1 {
		t.Fatalf("pdf-unlock with the password: %s %+v", u.State, u.Error)
	}
	if text := testenv.PDFText(t, m, c.do("GET", u.Outputs[0].URL, key, "", nil, nil).Body); !strings.Contains(text, "Quarterly harvest report") {
		t.Errorf("the unlocked chain's PDF says %q, want the document's text", text)
	}
	then := func(step string) map[string]any {
		return map[string]any{"then": []any{map[string]any{"renderer": step}}}
	}
	if r, _ := submitFields(t, c, key, "pdf-png", samples.PDF("x", 1), then("pdf-protect"), "", nil); r.Status != 400 || r.problemCode(t) != "unknown_renderer" || !strings.Contains(string(r.Body), "does not take") {
		t.Errorf("pdf-png then pdf-protect: %d %s, want 400 unknown_renderer saying pdf-protect does not take PNG", r.Status, r.Body)
	}
	// The steps after the first go in then, so that renderer alone selects
	// a request's schema.
	if r, _ := submitJSON(t, c, key, "pdf-pages|pdf-protect", samples.PDF("x", 1), nil, "", nil); r.Status != 400 || r.problemCode(t) != "unknown_renderer" || !strings.Contains(string(r.Body), "then") {
		t.Errorf("a renderer holding |: %d %s, want 400 unknown_renderer pointing at then", r.Status, r.Body)
	}
	if r, _ := submitFields(t, c, key, "pdf-pages", samples.PDF("x", 1), map[string]any{"then": []any{map[string]any{"renderer": "pdf-protect", "colour": "red"}}}, "", nil); r.Status != 400 || !strings.Contains(string(r.Body), "colour") {
		t.Errorf("a step with an unknown field: %d %s, want 400 naming it", r.Status, r.Body)
	}
	// A multipart chain: then as JSON text.
	ct, body := multipartBody(map[string]string{"renderer": "pdf-pages", "options": `{"pages": "1"}`,
		"then": `[{"renderer": "pdf-protect", "options": {"owner_password": "o"}}]`}, samples.PDF("multipart chain", 2))
	r := c.do("POST", "/v1/jobs?wait=60", key, ct, body, nil)
	var mj jobJSON
	if r.Status < 300 {
		r.json(t, &mj)
	}
	if mj.ID == "" {
		t.Fatalf("a multipart chain: %d %s", r.Status, r.Body)
	}
	mj = getJob(t, c, key, mj.ID, "?wait=60")
	if mj.State != "succeeded" || mj.Renderer != "pdf-pages|pdf-protect" || mj.Options["pdf-pages.pages"] != "1" || mj.Options["pdf-protect.owner_password"] != render.Redacted {
		t.Errorf("a multipart chain: %s %s %v %+v", mj.State, mj.Renderer, mj.Options, mj.Error)
	}

	checkOptimizeSize(t, c, key)
	checkFonts(t, c)
}

// checkFonts: GET /v1/fonts lists the rootfs's families, as the worker
// published them: Word's metric twins and Noto's core scripts among them.
func checkFonts(t *testing.T, c *client) {
	t.Helper()
	var fonts struct {
		Families      []string `json:"families"`
		RootfsDigests []string `json:"rootfs_digests"`
	}
	waitFor(t, "the worker to publish its fonts", 20*time.Second, func() bool {
		r := c.do("GET", "/v1/fonts", "", "", nil, nil)
		if r.Status == 200 {
			r.json(t, &fonts)
		}
		return r.Status == 200
	})
	for _, f := range []string{"Carlito", "Caladea", "Noto Sans Devanagari", "Noto Sans Thai", "DejaVu Sans"} {
		if !slices.Contains(fonts.Families, f) {
			t.Errorf("GET /v1/fonts lists %d families and not %q", len(fonts.Families), f)
		}
	}
	if len(fonts.RootfsDigests) != 1 {
		t.Errorf("GET /v1/fonts: rootfs digests %v, want the one worker's", fonts.RootfsDigests)
	}
}

// sizeOf reads a job's diagnostics.size.
func sizeOf(t *testing.T, c *client, key, id string) *struct {
	InputBytes   int64   `json:"input_bytes"`
	OutputBytes  int64   `json:"output_bytes"`
	SavedPercent float64 `json:"saved_percent"`
} {
	t.Helper()
	var j struct {
		Diagnostics struct {
			Size *struct {
				InputBytes   int64   `json:"input_bytes"`
				OutputBytes  int64   `json:"output_bytes"`
				SavedPercent float64 `json:"saved_percent"`
			} `json:"size"`
		} `json:"diagnostics"`
	}
	c.do("GET", "/v1/jobs/"+id, key, "", nil, nil).json(t, &j)
	return j.Diagnostics.Size
}

// pdf-optimize says in the job how much smaller it made its document:
// alone, on a PDF it cannot shrink (given back as it came: nothing
// saved); as a chain's last step after html-pdf of a page with a large
// photograph, its own step's input against the job's output.
func checkOptimizeSize(t *testing.T, c *client, key string) {
	t.Helper()
	small := samples.PDF("nothing to gain", 1)
	_, j := submitJSON(t, c, key, "pdf-optimize", small, nil, "?wait=60", nil)
	size := sizeOf(t, c, key, j.ID)
	if j.State != "succeeded" || size == nil || size.InputBytes != int64(len(small)) || size.OutputBytes != int64(len(small)) || size.SavedPercent != 0 {
		t.Errorf("pdf-optimize of a small PDF: %s %+v, size %+v; want succeeded, %d bytes in and out, nothing saved", j.State, j.Error, size, len(small))
	}
	img := image.NewRGBA(image.Rect(0, 0, 1600, 1200))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*7919%251) | 0x40
	}
	var jpg bytes.Buffer
	_ = jpeg.Encode(&jpg, img, &jpeg.Options{Quality: 95})
	page := []byte(`<!doctype html><h1>A photograph</h1><img style="width:100%" src="data:image/jpeg;base64,` + base64.StdEncoding.EncodeToString(jpg.Bytes()) + `">`)
	_, j = submitFields(t, c, key, "html-pdf", page, map[string]any{"then": []any{map[string]any{"renderer": "pdf-optimize"}}}, "?wait=60", nil)
	waitFor(t, "the optimizing chain to end", 3*time.Minute, func() bool { j = getJob(t, c, key, j.ID, ""); return j.terminal() })
	size = sizeOf(t, c, key, j.ID)
	if j.State != "succeeded" || len(j.Outputs) != 1 || size == nil || size.OutputBytes != j.Outputs[0].Size || size.InputBytes <= 2*size.OutputBytes || size.SavedPercent < 50 {
		t.Errorf("html-pdf then pdf-optimize: %s %+v, outputs %+v, size %+v; want the step's input more than halved, its output the job's", j.State, j.Error, j.Outputs, size)
	} else {
		t.Logf("html-pdf then pdf-optimize: %+v", *size)
	}
}
