package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func response(t *testing.T, files map[string]string, order []string, mutate func(*Result)) []byte {
	t.Helper()
	var b bytes.Buffer
	res := Result{}
	for _, name := range order {
		data := files[name]
		if err := WriteJSON(&b, TypeFile, FileHeader{Name: name, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteChunks(&b, TypeData, strings.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(data))
		res.Files = append(res.Files, FileInfo{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	if mutate != nil {
		mutate(&res)
	}
	if err := WriteJSON(&b, TypeResult, res); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRequestRoundTrip(t *testing.T) {
	t.Parallel()
	input := strings.Repeat("x", 3*MaxFrame+17)
	req := &Request{Mode: ModeRender, Argv: []string{"/usr/bin/true"}, InputName: "in.pdf", InputSize: int64(len(input))}
	var b bytes.Buffer
	if err := WriteRequest(&b, req, strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	r, err := ReadRequest(&b, &got, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if r.InputName != "in.pdf" || got.String() != input {
		t.Errorf("got name %q and %d input bytes, want in.pdf and %d", r.InputName, got.Len(), len(input))
	}
}

func TestReadRequestRejects(t *testing.T) {
	t.Parallel()
	for name, req := range map[string]*Request{
		"relative argv":   {Mode: ModeRender, Argv: []string{"sh"}, InputName: "a"},
		"no argv":         {Mode: ModeRender, InputName: "a"},
		"path in name":    {Mode: ModeRender, Argv: []string{"/bin/true"}, InputName: "../etc/passwd"},
		"dot name":        {Mode: ModeRender, Argv: []string{"/bin/true"}, InputName: ".."},
		"unknown mode":    {Mode: "exec", Argv: []string{"/bin/true"}, InputName: "a"},
		"too much input":  {Mode: ModeProbe, InputSize: 2 << 20},
		"negative limits": {Mode: ModeProbe, MaxOutputBytes: -1},
		"office input outside /tmp": {Mode: ModeRender, InputName: "a",
			Office: &Office{Input: "/etc/passwd", OutDir: OutputDir, Format: OfficePDF}},
		"office input dotted": {Mode: ModeRender, InputName: "a",
			Office: &Office{Input: "/tmp/in/../../etc/passwd", OutDir: OutputDir, Format: OfficePDF}},
		"office output outside /tmp": {Mode: ModeRender, InputName: "a",
			Office: &Office{Input: "/tmp/in/a", OutDir: "/usr/lib", Format: OfficePDF}},
		"office input elsewhere in /tmp": {Mode: ModeRender, InputName: "a",
			Office: &Office{Input: "/tmp/work/a", OutDir: OutputDir, Format: OfficePDF}},
		"office format": {Mode: ModeRender, InputName: "a",
			Office: &Office{Input: "/tmp/in/a", OutDir: OutputDir, Format: "html"}},
		"office and browser": {Mode: ModeRender, InputName: "a",
			Office:  &Office{Input: "/tmp/in/a", OutDir: OutputDir, Format: OfficePDF},
			Browser: &Browser{Argv: []string{"/bin/true"}, Page: "/tmp/in/a", Output: "o.pdf", PDF: &PDFOptions{}}},
	} {
		var b bytes.Buffer
		if err := WriteJSON(&b, TypeRequest, req); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadRequest(&b, io.Discard, 1<<20); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: ReadRequest = %v, want a protocol error", name, err)
		}
	}
}

// A diagnostic entry is cut to MaxDiagnosticBytes, "…" included, on a rune
// boundary, and cutting it again changes nothing: the host's cap leaves
// the honest agent's entries as they were sent.
func TestDiagnosticsAreCutOnceToTheSharedBounds(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "short", strings.Repeat("a", MaxDiagnosticBytes), strings.Repeat("a", MaxDiagnosticBytes+1),
		strings.Repeat("é", 150), strings.Repeat("€", 100), "x" + strings.Repeat("😀", 60), strings.Repeat("a", 1<<20)} {
		d := Diagnostic(s)
		switch {
		case len(s) <= MaxDiagnosticBytes && d != s:
			t.Errorf("a %d-byte entry became %q", len(s), d)
		case len(s) > MaxDiagnosticBytes && (len(d) > MaxDiagnosticBytes || len(d) < MaxDiagnosticBytes-6 || !strings.HasSuffix(d, "…") || !strings.HasPrefix(s, strings.TrimSuffix(d, "…"))):
			t.Errorf("a %d-byte entry became %d bytes: %q", len(s), len(d), d)
		case !utf8.ValidString(d) || Diagnostic(d) != d:
			t.Errorf("%q: not valid UTF-8, or cut again to %q", d, Diagnostic(d))
		}
	}
	many := make([]string, 1000)
	for i := range many {
		many[i] = strings.Repeat("b", i)
	}
	got := Diagnostics(many)
	if len(got) != MaxDiagnostics || got[MaxDiagnostics-1] != many[MaxDiagnostics-1] {
		t.Errorf("kept %d of 1000 entries, want the first %d", len(got), MaxDiagnostics)
	}
	if Diagnostics(nil) != nil {
		t.Errorf("no list became a list")
	}
}

func TestReadRequestOffice(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	want := Office{Input: InputDir + "/input.docx", OutDir: OutputDir, Format: OfficePDF}
	if err := WriteJSON(&b, TypeRequest, &Request{Mode: ModeRender, InputName: "input.docx", Office: &want}); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRequest(&b, io.Discard, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if r.Office == nil || !reflect.DeepEqual(*r.Office, want) || len(r.Steps) != 0 {
		t.Errorf("got office %+v and %d steps, want %+v and none", r.Office, len(r.Steps), want)
	}
}

func TestReadRequestInputLongerThanAnnounced(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	_ = WriteJSON(&b, TypeRequest, &Request{Mode: ModeProbe, InputSize: 3})
	_ = WriteFrame(&b, TypeInput, []byte("abcdef"))
	if _, err := ReadRequest(&b, io.Discard, 100); !errors.Is(err, ErrProtocol) {
		t.Errorf("ReadRequest = %v, want a protocol error", err)
	}
}

func TestReadResponse(t *testing.T) {
	t.Parallel()
	files := map[string]string{"page-1.png": "one", "page-2.png": strings.Repeat("2", MaxFrame+5)}
	raw := response(t, files, []string{"page-1.png", "page-2.png"}, nil)
	resp, err := ReadResponse(bytes.NewReader(raw), Limits{MaxBytes: 4 << 20, MaxFiles: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Files) != 2 || string(resp.Files[0].Data) != "one" || len(resp.Files[1].Data) != MaxFrame+5 {
		t.Errorf("got %d files", len(resp.Files))
	}
}

// memSpool keeps what a response spools, by file.
type memSpool struct {
	starts int
	files  map[string]*bytes.Buffer
}

func (m *memSpool) Start() { m.starts++; m.files = map[string]*bytes.Buffer{} }

func (m *memSpool) File(name string, size int64) io.Writer {
	m.files[name] = &bytes.Buffer{}
	return m.files[name]
}

// With a spool the files' bytes go there as they arrive, not into the
// response, and are still checked against the manifest.
func TestReadResponseToSpool(t *testing.T) {
	t.Parallel()
	files := map[string]string{"page-1.ppm": "one", "page-2.ppm": strings.Repeat("2", MaxFrame+5)}
	order := []string{"page-1.ppm", "page-2.ppm"}
	sp := &memSpool{}
	resp, err := ReadResponseTo(bytes.NewReader(response(t, files, order, nil)), Limits{MaxBytes: 4 << 20, MaxFiles: 10}, sp)
	if err != nil {
		t.Fatal(err)
	}
	if sp.starts != 1 || len(resp.Files) != 2 || resp.Files[0].Name != order[0] || resp.Files[1].Name != order[1] {
		t.Fatalf("%d starts, files %v", sp.starts, resp.Files)
	}
	for _, f := range resp.Files {
		if f.Data != nil || sp.files[f.Name].String() != files[f.Name] {
			t.Errorf("%s: %d bytes in the response, %d spooled; want none and %d", f.Name, len(f.Data), sp.files[f.Name].Len(), len(files[f.Name]))
		}
	}
	for name, mutate := range map[string]func(*Result){
		"digest": func(r *Result) { r.Files[1].SHA256 = strings.Repeat("0", 64) },
		"size":   func(r *Result) { r.Files[0].Size++ },
	} {
		raw := response(t, files, order, mutate)
		if _, err := ReadResponseTo(bytes.NewReader(raw), Limits{MaxBytes: 4 << 20, MaxFiles: 10}, sp); !errors.Is(err, ErrProtocol) {
			t.Errorf("a spooled file whose %s is not the manifest's: %v, want a protocol error", name, err)
		}
	}
}

func TestReadResponseLimits(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a": strings.Repeat("a", 1000), "b": "b"}
	raw := response(t, files, []string{"a", "b"}, nil)
	for name, lim := range map[string]Limits{
		"bytes": {MaxBytes: 999, MaxFiles: 10},
		"files": {MaxBytes: 1 << 20, MaxFiles: 1},
	} {
		if _, err := ReadResponse(bytes.NewReader(raw), lim); !errors.Is(err, ErrOutputLimit) {
			t.Errorf("%s: ReadResponse = %v, want ErrOutputLimit", name, err)
		}
	}
}

func TestReadResponseStopsAtTheCapWithoutReadingOn(t *testing.T) {
	t.Parallel()
	// A header announcing 1 GiB: the reader must refuse at the header, not
	// after buffering.
	var b bytes.Buffer
	_ = WriteJSON(&b, TypeFile, FileHeader{Name: "big", Size: 1 << 30})
	r := io.MultiReader(&b, neverEnding{})
	if _, err := ReadResponse(r, Limits{MaxBytes: 1 << 20, MaxFiles: 5}); !errors.Is(err, ErrOutputLimit) {
		t.Errorf("ReadResponse = %v, want ErrOutputLimit", err)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'D'
	}
	return len(p), nil
}

func TestReadResponseProtocolViolations(t *testing.T) {
	t.Parallel()
	good := map[string]string{"a": "hello"}
	cases := map[string][]byte{
		"digest mismatch": response(t, good, []string{"a"}, func(r *Result) { r.Files[0].SHA256 = strings.Repeat("0", 64) }),
		"unlisted file":   response(t, good, []string{"a"}, func(r *Result) { r.Files = nil }),
		"bad name":        response(t, map[string]string{"../x": "x"}, []string{"../x"}, nil),
		"dup name":        response(t, good, []string{"a", "a"}, nil),
		"bad frame type":  {'Z', 0, 0, 0, 0},
		"data first":      {TypeData, 0, 0, 0, 1, 'x'},
		"huge frame":      {TypeResult, 0xff, 0xff, 0xff, 0xff},
	}
	for name, raw := range cases {
		_, err := ReadResponse(bytes.NewReader(raw), Limits{MaxBytes: 1 << 20, MaxFiles: 10})
		if err == nil || errors.Is(err, ErrOutputLimit) {
			t.Errorf("%s: ReadResponse = %v, want a protocol error", name, err)
		}
	}
	if _, err := ReadResponse(bytes.NewReader(nil), Limits{MaxBytes: 1, MaxFiles: 1}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("empty stream: %v, want unexpected EOF", err)
	}
}

func FuzzReadResponse(f *testing.F) {
	var b bytes.Buffer
	_ = WriteJSON(&b, TypeFile, FileHeader{Name: "a", Size: 2})
	_ = WriteFrame(&b, TypeData, []byte("hi"))
	_ = WriteJSON(&b, TypeResult, Result{})
	f.Add(b.Bytes())
	f.Add([]byte{TypeResult, 0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, raw []byte) {
		resp, err := ReadResponse(bytes.NewReader(raw), Limits{MaxBytes: 1 << 16, MaxFiles: 8})
		if err != nil {
			return
		}
		var total int
		for _, f := range resp.Files {
			total += len(f.Data)
			if !ValidName(f.Name) {
				t.Fatalf("accepted file name %q", f.Name)
			}
		}
		if total > 1<<16 || len(resp.Files) > 8 {
			t.Fatalf("accepted %d bytes in %d files past the limits", total, len(resp.Files))
		}
	})
}

func FuzzReadRequest(f *testing.F) {
	var b bytes.Buffer
	_ = WriteRequest(&b, &Request{Mode: ModeRender, Argv: []string{"/bin/true"}, InputName: "in", InputSize: 3}, strings.NewReader("abc"))
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, raw []byte) {
		var in bytes.Buffer
		req, err := ReadRequest(bytes.NewReader(raw), &in, 1<<16)
		if err != nil {
			return
		}
		if int64(in.Len()) != req.InputSize || in.Len() > 1<<16 {
			t.Fatalf("wrote %d input bytes for a request announcing %d", in.Len(), req.InputSize)
		}
		if req.Mode == ModeRender && !ValidName(req.InputName) {
			t.Fatalf("accepted input name %q", req.InputName)
		}
	})
}
