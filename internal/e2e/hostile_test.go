//go:build !unit

package e2e

// The hostile corpus, through the real API and worker: every case ends in
// a terminal state with the right error code or a safe output (or is
// refused at the door with the right code), nothing reaches the canaries on
// the host's loopback, no output shows a local file or another job's input,
// the worker keeps serving, and no sandbox, bundle or cgroup is left over
// (checked when the test ends).

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

type hostileCase struct {
	name     string
	renderer string
	input    []byte
	options  map[string]any
	limits   map[string]any
	// Right ends for an accepted job: a state, or state:code.
	want []string
	// Right refusals at the door, as status:code; none means the job
	// must be accepted.
	door []string
	// noLeak strings must not appear in the text of a PDF output.
	noLeak []string
}

// corpusEnv fills the templates in testdata/hostile.
type corpusEnv struct {
	Canaries []string // host:port of listeners on the host's loopback
	StateDir string   // the worker's state dir, where other jobs' bundles live
	Secret   string   // a marker in another tenant's job
}

// openCanaries opens a canary on each of addrs that can be listened on,
// names them in env.Canaries, and draws env.Secret.
func (env *corpusEnv) openCanaries(t *testing.T, addrs ...string) []*sandbox.Canary {
	var canaries []*sandbox.Canary
	for _, a := range addrs {
		cn, err := sandbox.NewCanary(a)
		if err != nil {
			t.Logf("no canary on %s: %v", a, err)
			continue
		}
		t.Cleanup(func() { cn.Close() })
		canaries = append(canaries, cn)
		env.Canaries = append(env.Canaries, cn.Addr())
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	env.Secret = "SECRET" + hex.EncodeToString(b)
	return canaries
}

// loadCorpus reads testdata/hostile/corpus.json and its files.
func loadCorpus(t *testing.T, env corpusEnv) []hostileCase {
	dir := filepath.Join("..", "..", "testdata", "hostile")
	raw, err := os.ReadFile(filepath.Join(dir, "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Cases []struct {
			File     string         `json:"file"`
			Renderer string         `json:"renderer"`
			Options  map[string]any `json:"options"`
			Limits   map[string]any `json:"limits"`
			Want     []string       `json:"want"`
			NoLeak   []string       `json:"no_leak"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatalf("corpus.json: %v", err)
	}
	expand := func(name, text string) string {
		if !strings.Contains(text, "{{") {
			return text
		}
		var b strings.Builder
		if err := template.Must(template.New(name).Option("missingkey=error").Parse(text)).Execute(&b, env); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b.String()
	}
	var cases []hostileCase
	for _, c := range corpus.Cases {
		data, err := os.ReadFile(filepath.Join(dir, c.File))
		if err != nil {
			t.Fatal(err)
		}
		hc := hostileCase{name: c.File + " → " + c.Renderer, renderer: c.Renderer, input: []byte(expand(c.File, string(data))),
			options: c.Options, limits: c.Limits, want: c.Want}
		if c.Options != nil {
			hc.name += fmt.Sprintf(" %v", c.Options)
		}
		for _, s := range c.NoLeak {
			hc.noLeak = append(hc.noLeak, expand(c.File, s))
		}
		cases = append(cases, hc)
	}
	return cases
}

// generatedCases are the corpus's cases too large to keep as files.
func generatedCases() []hostileCase {
	var graph bytes.Buffer
	graph.WriteString("graph K {\n")
	for i := 0; i < 300; i++ {
		for j := i + 1; j < 300; j++ {
			fmt.Fprintf(&graph, "n%d -- n%d;\n", i, j)
		}
	}
	graph.WriteString("}\n")
	// 7000×7000 zeros: 49 Mpx, under max_pixels, deflated to a few
	// hundred kilobytes: the header passes, the decoder gets the bomb.
	var bomb bytes.Buffer
	_ = png.Encode(&bomb, image.NewGray(image.Rect(0, 0, 7000, 7000)))
	return []hostileCase{
		{name: "pdf with 3000 pages", renderer: "pdf-png", input: samples.PDF("many", 3000),
			options: map[string]any{"dpi": 36}, limits: map[string]any{"max_pages": 3}, want: []string{"succeeded"}},
		{name: "pdf with a 200-inch page", renderer: "pdf-png", input: samples.PDFPage(14400, 14400),
			limits: map[string]any{"timeout_seconds": 20, "memory_bytes": 512 << 20},
			// poppler may also refuse the size and draw nothing: a safe output.
			want: []string{"failed:memory_limit", "failed:render_failed", "failed:timeout", "failed:output_limit", "succeeded"}},
		{name: "complete graph on 300 nodes", renderer: "dot-svg", input: graph.Bytes(),
			limits: map[string]any{"timeout_seconds": 5}, want: []string{"failed:timeout", "succeeded"}},
		{name: fmt.Sprintf("png decompression bomb (%d bytes → 49 Mpx)", bomb.Len()), renderer: "image-thumbnail", input: bomb.Bytes(),
			limits: map[string]any{"memory_bytes": 256 << 20, "timeout_seconds": 30},
			want:   []string{"succeeded", "failed:memory_limit", "failed:timeout"}},
	}
}

// damagedCases damage a valid file of every accepted type.
// A damaged file may no longer look like its type (refused at the door);
// once accepted it must end as a safe output or render_failed, never as
// the sandbox's or the service's failure.
func damagedCases(webp []byte) []hostileCase {
	img := samples.Image(400, 300, 50, 50, 100)
	// Each type is truncated, and corrupted too where that reaches the
	// renderer differently. A truncated OOXML file has lost its ZIP
	// directory and is refused at the door, so those are corrupted
	// instead; ODF and RTF are only truncated, as each LibreOffice run
	// costs ~15 s here and HTML has no structure to corrupt.
	valid := []struct {
		typ, renderer string
		data          []byte
		corrupt       bool
	}{
		{"pdf", "pdf-png", samples.PDF("damaged", 2), true},
		{"svg", "svg-png", samples.SVG(200, 100, 20, 20, 40), true},
		{"html", "html-png", samples.HTML("Damaged", "a page cut short"), false},
		{"markdown", "markdown-html", samples.Markdown("Damaged"), true},
		{"dot", "dot-svg", samples.DOT("a", "b", "c", "d"), true},
		{"png", "image-thumbnail", samples.PNG(img), true},
		{"jpeg", "image-thumbnail", samples.JPEG(img), true},
		{"gif", "image-thumbnail", samples.GIF(img), true},
		{"tiff", "image-thumbnail", samples.TIFF(img), true},
		{"webp", "image-thumbnail", webp, true},
		{"docx", "office-pdf", samples.DOCX("damaged", "document"), true},
		{"xlsx", "office-pdf", samples.XLSX("damaged", "sheet"), true},
		{"pptx", "office-pdf", samples.PPTX("damaged slides"), true},
		{"odt", "office-pdf", samples.ODT("damaged", "text"), false},
		{"ods", "office-pdf", samples.ODS("damaged", "sheet"), false},
		{"odp", "office-pdf", samples.ODP("damaged slides"), false},
		{"rtf", "office-pdf", samples.RTF("damaged rtf"), false},
	}
	door := []string{"400:unsupported_input", "400:invalid_input"}
	var cases []hostileCase
	for _, v := range valid {
		want := []string{"succeeded", "failed:render_failed"}
		if v.renderer == "office-pdf" {
			want = append(want, "failed:timeout") // LibreOffice may keep trying to repair
		}
		truncated := v.data[:len(v.data)/2]
		// Keep the head and the tail (a ZIP's directory) so the type is
		// still recognised; wreck the middle.
		corrupt := slices.Clone(v.data)
		for i := len(corrupt) / 3; i < 2*len(corrupt)/3; i++ {
			corrupt[i] ^= 0x5a
		}
		cases = append(cases, hostileCase{name: "truncated " + v.typ, renderer: v.renderer, input: truncated, want: want, door: door})
		if v.corrupt {
			cases = append(cases, hostileCase{name: "corrupt " + v.typ, renderer: v.renderer, input: corrupt, want: want, door: door})
		}
	}
	return cases
}

// pdfOperationCases put the PDF operations (qpdf) through the damaged
// PDFs, a split into more parts than a job may return, and archives of
// PDFs that are not what pdf-merge takes.
func pdfOperationCases(t *testing.T) []hostileCase {
	pdf := samples.PDF("damaged", 3)
	corrupt := slices.Clone(pdf)
	for i := len(corrupt) / 3; i < 2*len(corrupt)/3; i++ {
		corrupt[i] ^= 0x5a
	}
	// archive packs files (name, data) stored, as several file parts are.
	archive := func(mode os.FileMode, files ...[2][]byte) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, f := range files {
			h := &zip.FileHeader{Name: string(f[0]), Method: zip.Store}
			h.SetMode(mode)
			w, err := zw.CreateHeader(h)
			if err == nil {
				_, err = w.Write(f[1])
			}
			if err != nil {
				t.Fatalf("packing %s: %v", f[0], err)
			}
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	door := []string{"400:unsupported_input", "400:invalid_input"}
	cases := []hostileCase{
		// 3000 parts: over the 1000 files a job may return.
		{name: "pdf-split of 3000 pages, a part each", renderer: "pdf-split", input: samples.PDF("many", 3000),
			limits: map[string]any{"timeout_seconds": 60}, want: []string{"failed:output_limit", "failed:timeout"}},
		{name: "pdf-merge of a file outside the archive", renderer: "pdf-merge", input: archive(0o644, [2][]byte{[]byte("../../etc/x.pdf"), pdf}), door: door},
		{name: "pdf-merge of a link", renderer: "pdf-merge", input: archive(os.ModeSymlink|0o777, [2][]byte{[]byte("x.pdf"), pdf}), door: door},
		// The mark is parsed in the sandbox only (pikepdf): a damaged one
		// fails the job or is repaired.
		{name: "pdf-stamp with a corrupt pdf as its mark", renderer: "pdf-stamp", input: archive(0o644, [2][]byte{[]byte("doc.pdf"), pdf}, [2][]byte{[]byte("mark.pdf"), corrupt}),
			want: []string{"succeeded", "failed:render_failed"}, door: door},
		{name: "pdf-attach of a corrupt pdf", renderer: "pdf-attach", input: archive(0o644, [2][]byte{[]byte("doc.pdf"), corrupt}, [2][]byte{[]byte("data.xml"), []byte("<x/>")}),
			want: []string{"succeeded", "failed:render_failed"}, door: door},
		{name: "pdf-attach of a pdf with a truncated pdf to embed", renderer: "pdf-attach", input: archive(0o644, [2][]byte{[]byte("doc.pdf"), pdf}, [2][]byte{[]byte("other.pdf"), pdf[:len(pdf)/2]}),
			want: []string{"succeeded"}, door: door},
		{name: "factur-x of a corrupt pdf", renderer: "factur-x", input: archive(0o644, [2][]byte{[]byte("invoice.pdf"), corrupt}, [2][]byte{[]byte("invoice.xml"), samples.FacturXML("F-1")}),
			want: []string{"succeeded", "failed:render_failed"}, door: door},
		{name: "factur-x with a billion laughs", renderer: "factur-x", input: archive(0o644, [2][]byte{[]byte("invoice.pdf"), pdf},
			[2][]byte{[]byte("invoice.xml"), []byte(`<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><l>&c;</l>`)}),
			want: []string{"failed:render_failed"}, door: door},
		{name: "pdf-watermark with a truncated pdf as its mark", renderer: "pdf-watermark", input: archive(0o644, [2][]byte{[]byte("doc.pdf"), pdf}, [2][]byte{[]byte("mark.pdf"), pdf[:len(pdf)/2]}),
			want: []string{"succeeded", "failed:render_failed"}, door: door},
	}
	for _, name := range []string{"pdf-merge", "pdf-split", "pdf-pages", "pdf-metadata", "pdf-protect", "pdf-unlock", "pdf-flatten", "pdf-watermark", "pdf-stamp", "pdf-archive", "pdf-optimize", "pdf-bookmarks"} {
		var opts map[string]any
		switch name {
		case "pdf-protect":
			opts = map[string]any{"owner_password": "owner"}
		case "pdf-watermark", "pdf-stamp":
			opts = map[string]any{"text": "DRAFT"}
		}
		// qpdf repairs what it can (its warnings do not fail the job).
		want := []string{"succeeded", "failed:render_failed"}
		cases = append(cases,
			hostileCase{name: name + " of a truncated pdf", renderer: name, input: pdf[:len(pdf)/2], options: opts, want: want, door: door},
			hostileCase{name: name + " of a corrupt pdf", renderer: name, input: corrupt, options: opts, want: want, door: door})
	}
	return cases
}

// The corpus runs with the worker's pool on (Chromium restored from a
// checkpoint, pdftoppm started ahead, the light tools pre-booted): a
// pooled sandbox must hold like a cold one, and whatever a hostile job
// does to it must not reach the next.
func TestHostileCorpus(t *testing.T) {
	// The corpus is submitted at once: more jobs than the default burst
	// of one key (40).
	s := newStack(t, stackOpts{apiArgs: []string{"-max-body-bytes", "8000000", "-burst", "200"},
		workerArgs: []string{"-pool-size", "chromium=1,office=0,pdf=1,light=1", "-pool-restore", "chromium"}})
	c := s.client
	key := s.key("mallory")
	extractor := testenv.Manager(t, sandbox.Config{})

	env := corpusEnv{StateDir: s.workerSB.StateDir}
	canaries := env.openCanaries(t, "127.0.0.1:0", "127.0.0.2:0", "[::1]:0")
	// Another tenant's job, running alongside, whose input the hostile
	// pages try to read.
	victimKey := s.key("victim")
	_, victim := submitJSON(t, c, victimKey, "html-pdf", samples.HTML("Victim", env.Secret), nil, "", nil)

	// A valid WebP, made by the sandboxed libvips: the stdlib has no encoder.
	_, wj := submitJSON(t, c, key, "image-thumbnail", samples.PNG(samples.Image(300, 200, 10, 10, 50)), map[string]any{"format": "webp"}, "?wait=60", nil)
	if wj.State != "succeeded" {
		t.Fatalf("making a WebP: %s %+v", wj.State, wj.Error)
	}
	webp := c.do("GET", wj.Outputs[0].URL, key, "", nil, nil).Body

	cases := append(loadCorpus(t, env), generatedCases()...)
	cases = append(cases, damagedCases(webp)...)
	cases = append(cases, pdfOperationCases(t)...)
	cases = append(cases, safePDFCases()...)
	ids := map[string]string{}
	for _, tc := range cases {
		body := map[string]any{"renderer": tc.renderer, "input_base64": base64.StdEncoding.EncodeToString(tc.input)}
		if tc.options != nil {
			body["options"] = tc.options
		}
		if tc.limits != nil {
			body["limits"] = tc.limits
		}
		raw, _ := json.Marshal(body)
		r := c.do("POST", "/v1/jobs", key, "application/json", raw, nil)
		if r.Status == 202 {
			var j jobJSON
			r.json(t, &j)
			ids[tc.name] = j.ID
			continue
		}
		if got := fmt.Sprintf("%d:%s", r.Status, r.problemCode(t)); slices.Contains(tc.door, got) {
			t.Logf("%-44s refused at the door: %s", tc.name, got)
		} else {
			t.Errorf("%s: submit %d %s, want 202 or one of %v", tc.name, r.Status, tail(r.Body), tc.door)
		}
	}
	deadline := time.Now().Add(8 * time.Minute)
	modes := map[string]int{}
	defer func() {
		t.Logf("sandboxes by mode: %v", modes)
		if modes[sandbox.ModeRestored] == 0 || modes[sandbox.ModePrebooted] == 0 {
			t.Errorf("sandboxes by mode %v: want some restored (chromium) and some prebooted (light)", modes)
		}
	}()
	for _, tc := range cases {
		id, ok := ids[tc.name]
		if !ok {
			continue
		}
		j := waitEnded(t, c, key, id, time.Until(deadline))
		if j.SandboxMode != "" {
			modes[j.SandboxMode]++
		}
		got := outcome(j.State, j.Error)
		if !slices.Contains(tc.want, got) {
			t.Errorf("%s: ended %s (%+v), want one of %v", tc.name, got, j.Error, tc.want)
			continue
		}
		t.Logf("%-44s %s", tc.name, got)
		if len(tc.noLeak) > 0 && j.State == "succeeded" {
			for _, o := range j.Outputs {
				if !strings.HasSuffix(o.Name, ".pdf") {
					t.Errorf("%s: output %s is not a PDF; its text cannot be checked", tc.name, o.Name)
					continue
				}
				text := testenv.PDFText(t, extractor, c.do("GET", o.URL, key, "", nil, nil).Body)
				for _, leak := range tc.noLeak {
					if strings.Contains(text, leak) {
						t.Errorf("%s: the output shows %q: %q", tc.name, leak, text)
					}
				}
			}
		}
		if tc.name == "pdf with 3000 pages" && len(j.Outputs) != 3 {
			t.Errorf("3000 pages under max_pages 3 gave %d outputs", len(j.Outputs))
		}
	}
	for _, cn := range canaries {
		if n := cn.Hits(); n != 0 {
			t.Errorf("canary %s got %d connections from sandboxes", cn.Addr(), n)
		}
	}
	// The secret was real: the victim's own output shows it.
	if vj := waitEnded(t, c, victimKey, victim.ID, time.Until(deadline)); vj.State != "succeeded" ||
		!strings.Contains(testenv.PDFText(t, extractor, c.do("GET", vj.Outputs[0].URL, victimKey, "", nil, nil).Body), env.Secret) {
		t.Errorf("the victim job (%s) does not show its own secret", vj.State)
	}

	refusedAtTheDoor(t, c, key)

	// The worker still serves.
	_, j := submitJSON(t, c, key, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "?wait=60", nil)
	if j.State != "succeeded" {
		t.Errorf("a healthy job after the corpus ended %s %+v", j.State, j.Error)
	}
}

// refusedAtTheDoor: for every renderer, zero bytes, another type's bytes
// and an input over its size limit are refused before any sandbox.
func refusedAtTheDoor(t *testing.T, c *client, key string) {
	type refusal struct {
		name, renderer string
		input          []byte
		status         int
		code           string
	}
	cases := []refusal{
		{"png bomb by its header (100000×100000)", "image-thumbnail", samples.PNGHeader(100000, 100000), 413, "input_too_large"},
		{"binary as markdown", "markdown-html", []byte("# ok\n\xff\xfe\x00\x01 binary"), 400, "unsupported_input"},
	}
	for _, r := range render.All() {
		other := samples.PDF("not yours", 1)
		if slices.Contains(r.Inputs, render.TypePDF) {
			other = samples.PNGHeader(10, 10)
		}
		if slices.Contains(r.Inputs, render.TypePDF) && slices.Contains(r.Inputs, render.TypePNG) {
			other = samples.DOT("a", "b") // safe-pdf takes both
		}
		// Past the renderer's limit, or past the body limit (8 MB of
		// JSON) for the renderers that take more: 413 either way.
		over := min(r.MaxInputBytes+1, 6_500_000)
		cases = append(cases,
			refusal{"zero bytes", r.Name, nil, 400, "unsupported_input"},
			refusal{"another type", r.Name, other, 400, "unsupported_input"},
			refusal{"oversized", r.Name, bytes.Repeat([]byte("A"), int(over)), 413, "input_too_large"})
	}
	for _, tc := range cases {
		r, _ := submitJSON(t, c, key, tc.renderer, tc.input, nil, "", nil)
		if r.Status != tc.status || r.problemCode(t) != tc.code {
			t.Errorf("%s → %s: %d %s, want %d %s", tc.name, tc.renderer, r.Status, tail(r.Body), tc.status, tc.code)
		}
	}
}
