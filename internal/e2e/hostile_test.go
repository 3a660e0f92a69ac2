package e2e

// The hostile corpus, through the real API and worker: every case ends in
// a terminal state with the right error code or a safe output, nothing
// reaches the canaries on the host's loopback, the worker keeps serving,
// and no sandbox, bundle or cgroup is left over (checked when the test
// ends).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
	// Outcomes that are right for this case: a job state, or state:code.
	want []string
	// noLeak, if set, must not appear in the text of a PDF output.
	noLeak string
}

func TestHostileCorpus(t *testing.T) {
	s := newStack(t, stackOpts{apiArgs: []string{"-max-body-bytes", "8000000"}})
	c := s.client
	key := s.key("mallory")
	extractor := testenv.Manager(t, sandbox.Config{})

	var canaries []*sandbox.Canary
	var addrs []string
	for _, a := range []string{"127.0.0.1:0", "127.0.0.2:0", "[::1]:0"} {
		cn, err := sandbox.NewCanary(a)
		if err != nil {
			t.Logf("no canary on %s: %v", a, err)
			continue
		}
		t.Cleanup(func() { cn.Close() })
		canaries = append(canaries, cn)
		addrs = append(addrs, cn.Addr())
	}
	var refs strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&refs, `<img src="http://%[1]s/img"><iframe src="http://%[1]s/frame"></iframe><link rel="stylesheet" href="http://%[1]s/css">
<script>fetch("http://%[1]s/fetch").catch(()=>{}); new WebSocket("ws://%[1]s/ws");</script>`, a)
	}
	svgRefs := ""
	for _, a := range addrs {
		svgRefs += fmt.Sprintf(`<image href="http://%s/svg.png" width="10" height="10"/>`, a)
	}

	billionLaughs := []byte(`<?xml version="1.0"?>
<!DOCTYPE svg [<!ENTITY a "lollollollollollollollollollol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
<!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;"><!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
<!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;"><!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;">]>
<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><text y="20">&h;</text></svg>`)
	xxe := []byte(`<?xml version="1.0"?>
<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<svg xmlns="http://www.w3.org/2000/svg" width="400" height="100"><text x="5" y="20">&x;</text></svg>`)
	var graph bytes.Buffer
	graph.WriteString("graph K {\n")
	for i := 0; i < 300; i++ {
		for j := i + 1; j < 300; j++ {
			fmt.Fprintf(&graph, "n%d -- n%d;\n", i, j)
		}
	}
	graph.WriteString("}\n")
	pdf := samples.PDF("corrupt", 2)

	cases := []hostileCase{
		{name: "svg billion laughs", renderer: "svg-png", input: billionLaughs,
			want: []string{"succeeded", "failed:render_failed", "failed:memory_limit", "failed:timeout"}},
		{name: "svg external entity", renderer: "svg-pdf", input: xxe, noLeak: "root:",
			want: []string{"succeeded", "failed:render_failed"}},
		{name: "svg referencing the host", renderer: "svg-png", input: []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50">` + svgRefs + `</svg>`),
			want: []string{"succeeded", "failed:render_failed"}},
		{name: "html referencing the host", renderer: "html-pdf", input: []byte("<!DOCTYPE html><p>canary page</p>" + refs.String()),
			want: []string{"succeeded"}},
		{name: "html reading local files", renderer: "html-pdf", noLeak: "root:",
			input: []byte(`<!DOCTYPE html><p>files</p><iframe src="file:///etc/shadow"></iframe><iframe src="file:///etc/passwd"></iframe>
<iframe src="file:///tmp/in/"></iframe><iframe src="file:///run/"></iframe>
<script>for (const u of ["file:///etc/passwd","file:///etc/shadow","/etc/passwd"]) { try { const x = new XMLHttpRequest(); x.open("GET", u, false); x.send(); document.body.append(x.responseText) } catch (e) {} }</script>`),
			want: []string{"succeeded"}},
		{name: "endless javascript", renderer: "html-pdf", input: []byte(`<!DOCTYPE html><script>for(;;){}</script>`),
			limits: map[string]any{"timeout_seconds": 8}, want: []string{"failed:timeout"}},
		{name: "javascript memory bomb", renderer: "html-pdf",
			input:  []byte(`<!DOCTYPE html><script>const a=[]; for(;;){ a.push(new Array(1e6).fill(Math.random())) }</script>`),
			limits: map[string]any{"timeout_seconds": 40, "memory_bytes": 768 << 20},
			want:   []string{"failed:memory_limit", "failed:render_failed", "failed:timeout"}},
		{name: "pdf with 3000 pages", renderer: "pdf-png", input: samples.PDF("many", 3000),
			options: map[string]any{"dpi": 36}, limits: map[string]any{"max_pages": 3}, want: []string{"succeeded"}},
		{name: "pdf with a 200-inch page", renderer: "pdf-png", input: samples.PDFPage(14400, 14400),
			limits: map[string]any{"timeout_seconds": 20, "memory_bytes": 512 << 20},
			// poppler may also refuse the size and draw nothing: a safe output.
			want: []string{"failed:memory_limit", "failed:render_failed", "failed:timeout", "failed:output_limit", "succeeded"}},
		{name: "complete graph on 300 nodes", renderer: "dot-svg", input: graph.Bytes(),
			limits: map[string]any{"timeout_seconds": 5}, want: []string{"failed:timeout", "succeeded"}},
		{name: "truncated pdf", renderer: "pdf-png", input: pdf[:len(pdf)/3], want: []string{"failed:render_failed", "succeeded"}},
		{name: "truncated svg", renderer: "svg-png", input: samples.SVG(100, 100, 0, 0, 10)[:80], want: []string{"failed:render_failed"}},
		// libvips draws what it could read: a safe output, or a failure.
		{name: "truncated png", renderer: "image-thumbnail", input: pngOf(400, 400)[:200], want: []string{"failed:render_failed", "succeeded"}},
		{name: "corrupt dot", renderer: "dot-png", input: []byte("digraph { a -> b -> ; ]]] }"), want: []string{"failed:render_failed"}},
		{name: "corrupt docx", renderer: "office-pdf", input: corruptDOCX(), want: []string{"failed:render_failed", "succeeded"}},
		{name: "invalid utf-8 markdown", renderer: "markdown-html", input: []byte("# ok\n broken utf-8 \xc3\x28 here\n"), want: []string{"succeeded", "failed:render_failed"}},
	}
	ids := map[string]string{}
	for _, tc := range cases {
		body := map[string]any{"renderer": tc.renderer, "input_base64": base64.StdEncoding.EncodeToString(tc.input)}
		if tc.options != nil {
			body["options"] = tc.options
		}
		if tc.limits != nil {
			body["limits"] = tc.limits
		}
		b, _ := json.Marshal(body)
		r := c.do("POST", "/v1/jobs", key, "application/json", b, nil)
		if r.Status != 202 {
			t.Errorf("%s: submit %d %s", tc.name, r.Status, tail(r.Body))
			continue
		}
		var j jobJSON
		r.json(t, &j)
		ids[tc.name] = j.ID
	}
	for _, tc := range cases {
		id, ok := ids[tc.name]
		if !ok {
			continue
		}
		j := getJob(t, c, key, id, "?wait=60")
		got := j.State
		if j.Error != nil {
			got += ":" + j.Error.Code
		}
		ok = false
		for _, w := range tc.want {
			ok = ok || w == got
		}
		if !ok {
			t.Errorf("%s: ended %s (%+v), want one of %v", tc.name, got, j.Error, tc.want)
			continue
		}
		t.Logf("%-28s %s", tc.name, got)
		if tc.noLeak != "" && j.State == "succeeded" {
			for _, o := range j.Outputs {
				data := c.do("GET", o.URL, key, "", nil, nil).Body
				if strings.HasSuffix(o.Name, ".pdf") {
					if text := testenv.PDFText(t, extractor, data); strings.Contains(text, tc.noLeak) {
						t.Errorf("%s: the output shows %q: %q", tc.name, tc.noLeak, text)
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

	// Refused at the door, before any sandbox.
	for _, tc := range []struct {
		name, renderer string
		input          []byte
		status         int
		code           string
	}{
		{"zero bytes", "pdf-png", nil, 400, "unsupported_input"},
		{"binary as markdown", "markdown-html", []byte("# ok\n\xff\xfe\x00\x01 binary"), 400, "unsupported_input"},
		{"type mismatch", "pdf-png", samples.PNGHeader(10, 10), 400, "unsupported_input"},
		{"png decompression bomb", "image-thumbnail", samples.PNGHeader(100000, 100000), 413, "input_too_large"},
		{"oversized body", "svg-png", bytes.Repeat([]byte("<"), 7_000_000), 413, "input_too_large"},
	} {
		r, _ := submitJSON(t, c, key, tc.renderer, tc.input, nil, "", nil)
		if r.Status != tc.status || r.problemCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, tail(r.Body), tc.status, tc.code)
		}
	}

	// The worker still serves.
	_, j := submitJSON(t, c, key, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "?wait=60", nil)
	if j.State != "succeeded" {
		t.Errorf("a healthy job after the corpus ended %s %+v", j.State, j.Error)
	}
}

func corruptDOCX() []byte {
	d := samples.DOCX("hello")
	// Keep the ZIP directory (so it still sniffs as DOCX), wreck the data.
	for i := 60; i < len(d)/2; i++ {
		d[i] ^= 0x5a
	}
	return d
}

func pngOf(w, h int) []byte {
	var b bytes.Buffer
	_ = pngEncode(&b, samples.Image(w, h, 0, 0, w/2))
	return b.Bytes()
}
