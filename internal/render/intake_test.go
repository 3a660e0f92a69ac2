package render_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/zipdir"
)

// Issue 10: 51 MB of options with 4 M unknown keys cost 940 MB and 11 s,
// and came back as a 55 MB error naming every key.
func TestFirstUnknownOptionEndsTheParse(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("pdf-png")
	in := samples.PDF("a", 1)

	big := samples.UnknownOptions(51<<20, `"dpi":72`)
	start := time.Now()
	_, err := r.PrepareJSON(in, big, nil)
	if took := time.Since(start); !errors.Is(err, render.ErrInvalidOptions) || len(err.Error()) > 200 || took > time.Second {
		t.Errorf("51 MB of unknown options: %d-byte error %.200v after %v, want a short invalid options error within a second", len(errMsg(err)), err, took)
	}

	small := []byte(`{"dpi": 72, "zz_first": 1, "aa_second": 2, "aa_third": 3}`)
	_, err = r.PrepareJSON(in, small, nil)
	if !errors.Is(err, render.ErrInvalidOptions) || !strings.Contains(err.Error(), `"zz_first"`) || strings.Contains(err.Error(), "aa_") {
		t.Errorf("three unknown options: %v, want an error naming only the first, \"zz_first\"", err)
	}
	long := []byte(`{"` + strings.Repeat("x", 5000) + `": 1}`)
	if _, err := r.PrepareJSON(in, long, nil); !errors.Is(err, render.ErrInvalidOptions) || len(err.Error()) > 300 {
		t.Errorf("a 5000-character unknown option: %d-byte error, want invalid options under 300 bytes", len(errMsg(err)))
	}
	for _, bad := range []string{`{"dpi": 72, "dpi": 73}`, `{"dpi": 72} {}`, `{"dpi": 72`, `"dpi"`} {
		if _, err := r.PrepareJSON(in, []byte(bad), nil); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("options %s: %v, want invalid options", bad, err)
		}
	}
	if p, err := r.PrepareJSON(in, []byte(` {"dpi": 72, "format": null} `), []byte("null")); err != nil || p.Options.Int("dpi") != 72 {
		t.Errorf("valid options: %v, dpi %v", err, p)
	}
}

// Issue 10: {"timeout_seconds": 1e-10} rounded to a zero duration, which
// meant the 60 s default — a lowered limit raised it.
func TestLimitsBelowAMillisecondAreRefused(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("dot-svg")
	in := samples.DOT("a", "b")
	for _, lim := range []string{
		`{"timeout_seconds": 1e-10}`, `{"timeout_seconds": 0.0009}`, `{"timeout_seconds": 0}`, `{"timeout_seconds": -1}`,
		`{"memory_bytes": 0}`, `{"max_output_bytes": 1.5}`, `{"timeout_seconds": "5"}`, `{"timeout": 5}`,
		`{"timeout_seconds": 5, "timeout_seconds": 5}`,
	} {
		if p, err := r.PrepareJSON(in, nil, []byte(lim)); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("limits %s: got %v (timeout %v), want invalid options", lim, err, planTimeout(p))
		}
	}
	p, err := r.PrepareJSON(in, nil, []byte(`{"timeout_seconds": 0.001}`))
	if err != nil || p.Job.Limits.Timeout != time.Millisecond {
		t.Errorf("timeout_seconds 0.001: %v, timeout %v, want 1ms", err, planTimeout(p))
	}
}

func planTimeout(p *render.Plan) time.Duration {
	if p == nil {
		return 0
	}
	return p.Job.Limits.Timeout
}

func errMsg(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The plan carries the validated limits, so what is queued is their
// canonical form, not the client's text.
func TestPlanCarriesTheValidatedLimits(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("dot-svg")
	raw := `{"timeout_seconds":` + strings.Repeat(" ", 7000) + `5, "max_output_bytes": null}`
	p, err := r.PrepareJSON(samples.DOT("a", "b"), nil, []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p.Request)
	if string(b) != `{"timeout_seconds":5}` {
		t.Errorf("plan's limit request = %s, want {\"timeout_seconds\":5}", b)
	}
}

// Issue 10: a 48 MB ZIP of 900 k entries cost 335 MB while archive/zip
// parsed its directory to sniff a type. The end record is read first and
// the directory never, when it is over the caps.
func TestZipDirectoryIsCappedBeforeItIsRead(t *testing.T) {
	r, _ := render.Lookup("office-pdf")
	huge := samples.ZipDirectory(900_000, 900_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := r.Prepare(huge, nil, render.LimitRequest{})
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, render.ErrInputTooLarge) || !strings.Contains(err.Error(), "900000 entries") {
		t.Errorf("a %d-byte ZIP of 900000 entries: %v, want input too large naming the count", len(huge), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 || took > time.Second {
		t.Errorf("refusing it allocated %d bytes in %v, want under 1 MiB within a second", alloc, took)
	}

	// The stated count may lie: the walk counts for itself.
	for _, tc := range []struct {
		name    string
		zip     []byte
		wantErr error
	}{
		{"10001 entries stated as 1", samples.ZipDirectory(zipdir.MaxEntries+1, 1), render.ErrInputTooLarge},
		{"70000 entries in ZIP64 stated as 4464", samples.ZipDirectory(70_000, 70_000-65_536), render.ErrInputTooLarge},
		{"a 4.7 MB directory stated as 5 entries", samples.ZipDirectory(100_000, 5), render.ErrInputTooLarge},
		{"10000 entries", samples.ZipDirectory(zipdir.MaxEntries, zipdir.MaxEntries), render.ErrUnsupportedInput},
		{"90000 entries stated truly in ZIP64", samples.ZipDirectory(90_000, 90_000), render.ErrInputTooLarge},
	} {
		if _, err := r.Prepare(tc.zip, nil, render.LimitRequest{}); !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	if got := render.Sniff(huge); got != render.TypeZIP {
		t.Errorf("Sniff(900000 entries) = %q, want %q", got, render.TypeZIP)
	}
	// A real archive with many small entries is still read.
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := 0; i < 3000; i++ {
		_, _ = zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("media/%d.xml", i), Method: zip.Store})
	}
	_, _ = zw.CreateHeader(&zip.FileHeader{Name: "word/document.xml", Method: zip.Store})
	_, _ = zw.CreateHeader(&zip.FileHeader{Name: "[Content_Types].xml", Method: zip.Store})
	_ = zw.Close()
	if got := render.Sniff(b.Bytes()); got != render.TypeDOCX {
		t.Errorf("Sniff(docx of 3002 entries) = %q, want %q", got, render.TypeDOCX)
	}
}
