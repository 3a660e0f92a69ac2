//go:build !unit

package render_test

// The PDF operations (qpdf) through real sandboxes, their results read
// back with poppler in another sandbox: page counts, the order of the
// pages' text, rotation, document information, encryption.

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

// pageTexts returns, per page of pdf, the samples.PDF label on it ("alpha
// page 3"), read by pdftotext page by page in one sandbox.
func pageTexts(t *testing.T, m *sandbox.Manager, pdf []byte) []string {
	t.Helper()
	n := pdfPages(t, m, pdf)
	var steps []wire.Step
	for i := 1; i <= n; i++ {
		steps = append(steps, wire.Step{Argv: []string{"/usr/bin/pdftotext", "-f", fmt.Sprint(i), "-l", fmt.Sprint(i), wire.InputDir + "/in.pdf", fmt.Sprintf("%s/p%03d.txt", wire.OutputDir, i)}})
	}
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{Mode: wire.ModeRender, InputName: "in.pdf", InputSize: int64(len(pdf)), Steps: steps, Env: []string{"PATH=/usr/bin:/bin"}},
		Input:   bytes.NewReader(pdf),
	})
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	var texts []string
	for _, f := range res.Response.Files {
		texts = append(texts, strings.TrimSpace(string(f.Data)))
	}
	return texts
}

func pdfPages(t *testing.T, m *sandbox.Manager, pdf []byte) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(pdfInfo(t, m, pdf)["Pages"], &n); err != nil {
		t.Fatalf("pdfinfo gives no page count: %v", err)
	}
	return n
}

// labels are samples.PDF's page labels.
func labels(text string, pages ...int) []string {
	var ls []string
	for _, p := range pages {
		ls = append(ls, fmt.Sprintf("%s page %d", text, p))
	}
	return ls
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// sandboxErr runs a job that must fail (renderErr) and returns its
// sandbox error.
func sandboxErr(t *testing.T, m *sandbox.Manager, name string, input []byte, opts map[string]any) *sandbox.Error {
	t.Helper()
	err := renderErr(t, m, name, input, opts)
	var e *sandbox.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s %v: %v, want a sandbox error", name, opts, err)
	}
	return e
}

func TestPDFMerge(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	// The order of the parts, not of their names.
	input := storedZip(t, zip.Store,
		[2][]byte{[]byte("z.pdf"), samples.PDF("alpha", 2)},
		[2][]byte{[]byte("dir/a.pdf"), samples.PDF("beta", 3)},
		[2][]byte{[]byte("m.pdf"), samples.PDF("gamma", 1)})
	out, _ := renderOK(t, m, "pdf-merge", input, nil)
	got := pageTexts(t, m, out["output.pdf"])
	want := append(append(labels("alpha", 1, 2), labels("beta", 1, 2, 3)...), labels("gamma", 1)...)
	if !equal(got, want) {
		t.Errorf("merged pages say %q, want %q", got, want)
	}
}

// pdf-merge's bookmarks: one per file on its first page, titled by its
// file name or by the titles given, read back by qpdf as the outline.
func TestPDFMergeBookmarks(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := storedZip(t, zip.Store,
		[2][]byte{[]byte("cover.pdf"), samples.PDF("alpha", 2)},
		[2][]byte{[]byte("parts/body.pdf"), samples.PDF("beta", 3)},
		[2][]byte{[]byte("annex.pdf"), samples.PDF("gamma", 1)})
	for _, tc := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{"bookmarks": true}, "cover@1 body@3 annex@6"},
		{map[string]any{"titles": "Cover\nThe report, part 1\nAnnexe — données"}, "Cover@1 The report, part 1@3 Annexe — données@6"},
	} {
		out, _ := renderOK(t, m, "pdf-merge", input, tc.opts)
		pdf := out["output.pdf"]
		if got := outlineOf(t, m, pdf); got != tc.want {
			t.Errorf("%v: bookmarks %q, want %q", tc.opts, got, tc.want)
		}
		if n := pdfPages(t, m, pdf); n != 6 {
			t.Errorf("%v: %d pages, want 6", tc.opts, n)
		}
	}
	r, _ := render.Lookup("pdf-merge")
	for _, bad := range []string{"one\ntwo", "a\n\nc", "a\tb\nc\nd"} {
		if _, err := r.Prepare(input, map[string]any{"titles": bad}, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("titles %q: %v, want invalid options", bad, err)
		}
	}
}

// outlineOf is the document's top-level bookmarks as "title@page …", as
// qpdf --json reads them.
func outlineOf(t *testing.T, m *sandbox.Manager, pdf []byte) string {
	t.Helper()
	out := testenv.Tool(t, m, "qpdf", pdf, "--json", "--json-key=outlines")
	var q struct {
		Outlines []struct {
			Title            string `json:"title"`
			DestPageposfrom1 int    `json:"destpageposfrom1"`
		} `json:"outlines"`
	}
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatalf("qpdf --json: %v\n%.300s", err, out)
	}
	var items []string
	for _, o := range q.Outlines {
		items = append(items, fmt.Sprintf("%s@%d", o.Title, o.DestPageposfrom1))
	}
	return strings.Join(items, " ")
}

// Every input of pdf-merge is sniffed before a sandbox starts.
func TestPDFMergeRefusesWhatIsNotAPDF(t *testing.T) {
	t.Parallel()
	pdf := samples.PDF("one", 1)
	for _, tc := range []struct {
		name  string
		input []byte
		want  error
		msg   string
	}{
		{"an image among the PDFs", storedZip(t, zip.Store, [2][]byte{[]byte("a.pdf"), pdf}, [2][]byte{[]byte("b.png"), samples.PNGHeader(4, 4)}), render.ErrUnsupportedInput, `"b.png" is not a PDF`},
		{"a compressed entry", storedZip(t, zip.Deflate, [2][]byte{[]byte("a.pdf"), pdf}), render.ErrInvalidInput, "stored entries only"},
		{"an archive of a directory", storedZip(t, zip.Store, [2][]byte{[]byte("d/"), nil}), render.ErrInvalidInput, "no file to merge"},
		{"an image alone", samples.PNGHeader(4, 4), render.ErrUnsupportedInput, "accepts"},
	} {
		r, _ := render.Lookup("pdf-merge")
		_, err := r.Prepare(tc.input, nil, render.LimitRequest{})
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
			t.Errorf("%s: %v, want %v mentioning %q", tc.name, err, tc.want, tc.msg)
		}
	}
	var parts [][2][]byte
	for i := range render.MaxMergeFiles + 1 {
		parts = append(parts, [2][]byte{[]byte(fmt.Sprintf("%d.pdf", i)), pdf})
	}
	r, _ := render.Lookup("pdf-merge")
	if _, err := r.Prepare(storedZip(t, zip.Store, parts...), nil, render.LimitRequest{}); !errors.Is(err, render.ErrInputTooLarge) {
		t.Errorf("%d files: %v, want %v", len(parts), err, render.ErrInputTooLarge)
	}
}

func TestPDFSplit(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	// Twelve pages: qpdf pads its page numbers to two digits.
	input := samples.PDF("page", 12)
	for _, tc := range []struct {
		opts map[string]any
		want [][]int
	}{
		{map[string]any{"every": 5}, [][]int{{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12}}},
		{map[string]any{"ranges": "10-12,1,3-2"}, [][]int{{10, 11, 12}, {1}, {3, 2}}},
		{nil, [][]int{{1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}}},
	} {
		out, _ := renderOK(t, m, "pdf-split", input, tc.opts)
		if len(out) != len(tc.want) {
			t.Errorf("%v: outputs %v, want %d parts", tc.opts, keys(out), len(tc.want))
			continue
		}
		if tc.opts == nil {
			// One page each: the published order alone is checked.
			for i := range tc.want {
				if got := pdfText(t, m, out[fmt.Sprintf("part-%d.pdf", i+1)]); !strings.Contains(got, fmt.Sprintf("page page %d\n", i+1)) {
					t.Errorf("part-%d.pdf says %q", i+1, got)
				}
			}
			continue
		}
		for i, pages := range tc.want {
			name := fmt.Sprintf("part-%d.pdf", i+1)
			if got, want := pageTexts(t, m, out[name]), labels("page", pages...); !equal(got, want) {
				t.Errorf("%v: %s says %q, want %q", tc.opts, name, got, want)
			}
		}
	}
	e := sandboxErr(t, m, "pdf-split", input, map[string]any{"ranges": "1-3,13"})
	if e.Outcome != sandbox.RenderFailed || !strings.Contains(e.Msg, "out of range") {
		t.Errorf("a range past the end: %s %q, want render_failed saying out of range", e.Outcome, e.Msg)
	}
	r, _ := render.Lookup("pdf-split")
	if _, err := r.Prepare(input, map[string]any{"every": 2, "ranges": "1"}, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
		t.Errorf("every and ranges: %v, want %v", err, render.ErrInvalidOptions)
	}
}

// qpdf names the parts by their pages, zero-padded; the host publishes
// them by their first page, renamed in sequence, output_name included.
func TestPDFSplitPartsArePublishedInPageOrder(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("pdf-split")
	first, second, third := samples.PDF("first", 1), samples.PDF("second", 1), samples.PDF("third", 1)
	outs, err := r.AcceptOutputs([]wire.File{
		{Name: "split-100-120.pdf", Data: third}, {Name: "split-9.pdf", Data: first}, {Name: "split-010-099.pdf", Data: second}})
	if err != nil {
		t.Fatal(err)
	}
	outs, err = r.NameOutputs(outs, "report")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]byte{first, second, third} {
		if name := fmt.Sprintf("report-%d.pdf", i+1); outs[i].Name != name || !bytes.Equal(outs[i].Data, want) {
			t.Errorf("output %d is %s, want %s with the part's bytes", i, outs[i].Name, name)
		}
	}
}

func TestPDFPages(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.PDF("page", 5)
	out, _ := renderOK(t, m, "pdf-pages", input, map[string]any{"pages": "3,1,2-4", "rotate": 90, "rotate_pages": "1,3"})
	pdf := out["output.pdf"]
	if got, want := pageTexts(t, m, pdf), labels("page", 3, 1, 2, 3, 4); !equal(got, want) {
		t.Errorf("pages say %q, want %q", got, want)
	}
	// pdfinfo -f -l lists each page's rotation; rotate_pages counts the
	// output's pages.
	var rots []string
	for _, line := range strings.Split(testenv.Tool(t, m, "pdfinfo", pdf, "-f", "1", "-l", "5"), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "Page" && f[2] == "rot:" {
			rots = append(rots, f[3])
		}
	}
	if want := []string{"90", "0", "90", "0", "0"}; !equal(rots, want) {
		t.Errorf("pages' rotation %q, want %q", rots, want)
	}
	r, _ := render.Lookup("pdf-pages")
	for _, opts := range []map[string]any{{"rotate": 45}, {"rotate_pages": "1"}, {"pages": "1;2"}, {"rotate": 360}} {
		if _, err := r.Prepare(input, opts, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("%v: %v, want %v", opts, err, render.ErrInvalidOptions)
		}
	}
}

// pdfMetadata reads a PDF's information with pdf-metadata.
func pdfMetadata(t *testing.T, m *sandbox.Manager, pdf []byte) map[string]any {
	t.Helper()
	out, _ := renderOK(t, m, "pdf-metadata", pdf, nil)
	var meta map[string]any
	if err := json.Unmarshal(out["metadata.json"], &meta); err != nil {
		t.Fatalf("metadata.json: %v", err)
	}
	return meta
}

func TestPDFMetadata(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.PDF("page", 3)
	meta := pdfMetadata(t, m, input)
	if meta["pages"] != 3.0 || meta["encrypted"] != false || meta["title"] != nil {
		t.Errorf("metadata of a plain PDF: %v, want 3 pages, not encrypted, no title", meta)
	}
	set := map[string]any{"title": "Rapport annuel — 漢字 (draft) \\ 2026", "author": "-Ada @Lovelace", "subject": "Quarterly", "keywords": "one, two",
		"creation_date": "2026-12-03T13:30:00+05:30", "mod_date": "2026-12-04"}
	out, _ := renderOK(t, m, "pdf-metadata", input, set)
	written := out["output.pdf"]
	meta = pdfMetadata(t, m, written)
	readBack := map[string]any{"creation_date": "D:20261203133000+05'30'", "mod_date": "D:20261204"}
	for k, v := range set {
		if want, ok := readBack[k]; ok {
			v = want
		}
		if meta[k] != v {
			t.Errorf("%s read back %q, want %q", k, meta[k], v)
		}
	}
	if info := pdfInfo(t, m, written); info["Title"] != set["title"] || info["Author"] != set["author"] || info["Pages"] != "3" {
		t.Errorf("pdfinfo: title %q, author %q, pages %q", info["Title"], info["Author"], info["Pages"])
	}
	r, _ := render.Lookup("pdf-metadata")
	for _, opts := range []map[string]any{{"mod_date": "2026-13-01"}, {"creation_date": "2026-12-03T25:00Z"}, {"mod_date": "yesterday"}} {
		if _, err := r.Prepare(input, opts, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("%v: %v, want %v", opts, err, render.ErrInvalidOptions)
		}
	}
	// Writing again changes what is given and keeps the rest.
	out, _ = renderOK(t, m, "pdf-metadata", written, map[string]any{"title": "Second"})
	if meta = pdfMetadata(t, m, out["output.pdf"]); meta["title"] != "Second" || meta["author"] != set["author"] {
		t.Errorf("after a second write: %v", meta)
	}
}

// Dates are written as PDF dates (PDF 1.7, 7.9.4): the day alone, or the
// time with Z or the offset as +HH'mm'.
func TestPDFMetadataWritesPDFDates(t *testing.T) {
	t.Parallel()
	r, _ := render.Lookup("pdf-metadata")
	for in, want := range map[string]string{
		"2026-12-03": `"D:20261203"`, "2026-12-03T13:30:15Z": `"D:20261203133015Z"`,
		"2026-12-03T13:30-03:00": `"D:20261203133000-03'00'"`, "2026-12-03T13:30:00+05:45": `"D:20261203133000+05'45'"`,
	} {
		plan, err := r.Prepare(samples.PDF("x", 1), map[string]any{"mod_date": in}, render.LimitRequest{})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var argv []string
		for _, st := range plan.Job.Request.Steps {
			argv = append(argv, st.Argv...)
		}
		if got := strings.Join(argv, " "); !strings.Contains(got, `{"ModDate":`+want+`}`) {
			t.Errorf("mod_date %s: the steps run %s, want ModDate %s", in, got, want)
		}
	}
}

// pdfinfoWith runs pdfinfo with args in a sandbox and returns its output
// or its failure.
func pdfinfoWith(m *sandbox.Manager, pdf []byte, args ...string) (string, error) {
	return toolOn(m, pdf, append(append([]string{"/usr/bin/pdfinfo"}, args...), wire.InputDir+"/in.pdf")...)
}

// toolOn runs argv in a sandbox on pdf (at wire.InputDir/in.pdf) and
// returns its stdout.
func toolOn(m *sandbox.Manager, pdf []byte, argv ...string) (string, error) {
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{Mode: wire.ModeRender, InputName: "in.pdf", InputSize: int64(len(pdf)),
			Steps: []wire.Step{{Argv: argv, Stdout: wire.OutputDir + "/stdout.txt"}}, Env: []string{"PATH=/usr/bin:/bin"}},
		Input: bytes.NewReader(pdf),
	})
	if err != nil {
		return "", err
	}
	return string(res.Response.Files[0].Data), nil
}

// showEncryption is qpdf --show-encryption of pdf opened with password,
// run in a sandbox.
func showEncryption(m *sandbox.Manager, pdf []byte, password string) (string, error) {
	return toolOn(m, pdf, "/usr/bin/qpdf", "--password="+password, "--show-encryption", wire.InputDir+"/in.pdf")
}

func TestPDFProtectAndUnlock(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.PDF("secret", 2)
	opts := map[string]any{"user_password": "open sesame", "owner_password": "owner é pw", "allow_copy": false}
	r, plan := mustPlan(t, "pdf-protect", input, opts)
	if rec := r.Recorded(plan.Options); rec["user_password"] != render.Redacted || rec["owner_password"] != render.Redacted {
		t.Errorf("the job's record holds %v, want the passwords redacted", rec)
	}
	out, _ := renderOK(t, m, "pdf-protect", input, opts)
	locked := out["output.pdf"]
	if _, err := pdfinfoWith(m, locked); err == nil || !strings.Contains(err.Error(), "Incorrect password") {
		t.Errorf("pdfinfo without the password: %v, want it refused", err)
	}
	info, err := pdfinfoWith(m, locked, "-upw", "open sesame")
	if err != nil || !strings.Contains(info, "AES-256") || !strings.Contains(info, "copy:no") || !strings.Contains(info, "print:yes") {
		t.Errorf("pdfinfo with the password: %v\n%s\nwant AES-256, copy:no, print:yes", err, info)
	}
	e := sandboxErr(t, m, "pdf-unlock", locked, map[string]any{"password": "wr0ng guess"})
	if e.Outcome != sandbox.RenderFailed || !strings.Contains(e.Msg, "invalid password") || strings.Contains(e.Msg+e.Stderr, "wr0ng guess") {
		t.Errorf("a wrong password: %s %q, want render_failed saying invalid password", e.Outcome, e.Msg)
	}
	for _, pw := range []string{"open sesame", "owner é pw"} {
		out, _ := renderOK(t, m, "pdf-unlock", locked, map[string]any{"password": pw})
		if got, want := pageTexts(t, m, out["output.pdf"]), labels("secret", 1, 2); !equal(got, want) {
			t.Errorf("unlocked with %q: pages say %q, want %q", pw, got, want)
		}
		if info := pdfInfo(t, m, out["output.pdf"]); info["Encrypted"] != "no" {
			t.Errorf("unlocked with %q: pdfinfo says encrypted %q", pw, info["Encrypted"])
		}
	}
	// Without a user password anyone opens it, under the permissions.
	out, _ = renderOK(t, m, "pdf-protect", input, map[string]any{"owner_password": "o", "allow_print": false, "allow_modify": false})
	if info := pdfInfo(t, m, out["output.pdf"]); !strings.Contains(info["Encrypted"], "print:no") || !strings.Contains(info["Encrypted"], "change:no") {
		t.Errorf("owner password only: encrypted %q, want print:no change:no", info["Encrypted"])
	}
	// The narrower permissions: forms may be filled, nothing else; and
	// allow_modify alone still governs the three when they are absent.
	for _, tc := range []struct {
		opts map[string]any
		want []string
	}{
		{map[string]any{"allow_modify": false, "allow_fill_forms": true},
			[]string{"modify document assembly: not allowed", "modify forms: allowed", "modify annotations: not allowed", "modify other: not allowed"}},
		{map[string]any{"allow_assemble": false},
			[]string{"modify document assembly: not allowed", "modify forms: allowed", "modify annotations: allowed", "modify other: allowed"}},
		{map[string]any{"allow_modify": false},
			[]string{"modify document assembly: not allowed", "modify forms: not allowed", "modify annotations: not allowed", "modify other: not allowed"}},
	} {
		tc.opts["owner_password"] = "o"
		out, _ := renderOK(t, m, "pdf-protect", input, tc.opts)
		enc, err := showEncryption(m, out["output.pdf"], "")
		for _, w := range tc.want {
			if err != nil || !strings.Contains(enc, w) {
				t.Errorf("%v: qpdf --show-encryption %v\n%s\nwant %q", tc.opts, err, enc, w)
			}
		}
	}
	if meta := pdfMetadata(t, m, out["output.pdf"]); meta["encrypted"] != true || meta["pages"] != 2.0 {
		t.Errorf("pdf-metadata of the protected PDF: %v, want encrypted, 2 pages", meta)
	}
	// A user password alone: it opens the document, the random owner
	// password it got does not come with it, so the restrictions hold.
	out, _ = renderOK(t, m, "pdf-protect", input, map[string]any{"user_password": "only me", "allow_copy": false})
	locked = out["output.pdf"]
	if _, err := pdfinfoWith(m, locked); err == nil || !strings.Contains(err.Error(), "Incorrect password") {
		t.Errorf("user password only, pdfinfo without it: %v, want it refused", err)
	}
	if info, err := pdfinfoWith(m, locked, "-upw", "only me"); err != nil || !strings.Contains(info, "AES-256") || !strings.Contains(info, "copy:no") || !strings.Contains(info, "print:yes") {
		t.Errorf("user password only, pdfinfo with it: %v\n%s\nwant AES-256, copy:no, print:yes", err, info)
	}
	if enc, err := showEncryption(m, locked, "only me"); err != nil || !strings.Contains(enc, "Supplied password is user password") || strings.Contains(enc, "Supplied password is owner password") {
		t.Errorf("user password only: qpdf --show-encryption with it: %v\n%s\nwant it the user password, not the owner's", err, enc)
	}
	pr, _ := render.Lookup("pdf-protect")
	for _, opts := range []map[string]any{{}, {"allow_copy": false}, {"owner_password": "-x"}, {"owner_password": "@/etc/passwd"}, {"owner_password": "a\nb"}} {
		_, err := pr.Prepare(input, opts, render.LimitRequest{})
		if !errors.Is(err, render.ErrInvalidOptions) || strings.Contains(err.Error(), "passwd") {
			t.Errorf("%q: %v, want %v without the value", opts, err, render.ErrInvalidOptions)
		}
	}
}

// Each PDF operation refuses what is not a PDF before a sandbox starts,
// and ends a damaged PDF in a clear outcome: qpdf repairs it or fails.
func TestPDFOperationsOnBadInput(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	pdf := samples.PDF("damaged", 3)
	corrupt := bytes.Clone(pdf)
	for i := len(corrupt) / 3; i < 2*len(corrupt)/3; i++ {
		corrupt[i] ^= 0x5a
	}
	opts := goodOptions
	for _, name := range []string{"pdf-merge", "pdf-split", "pdf-pages", "pdf-metadata", "pdf-protect", "pdf-unlock", "pdf-flatten", "pdf-watermark", "pdf-stamp", "pdf-archive", "pdf-optimize", "pdf-bookmarks"} {
		r, _ := render.Lookup(name)
		for _, bad := range [][]byte{samples.PNGHeader(8, 8), samples.HTML("x", "y"), nil} {
			if _, err := r.Prepare(bad, opts[name], render.LimitRequest{}); !errors.Is(err, render.ErrUnsupportedInput) {
				t.Errorf("%s of %q…: %v, want %v", name, bad[:min(len(bad), 8)], err, render.ErrUnsupportedInput)
			}
		}
		for what, input := range map[string][]byte{"truncated": pdf[:len(pdf)/2], "corrupt": corrupt} {
			_, plan := mustPlan(t, name, input, opts[name])
			res, err := m.Run(context.Background(), plan.Job)
			var e *sandbox.Error
			switch {
			case err == nil:
				if _, err := r.AcceptOutputs(res.Response.Files); err != nil {
					t.Errorf("%s of a %s PDF: %v", name, what, err)
				}
			case errors.As(err, &e) && e.Outcome == sandbox.RenderFailed:
				t.Logf("%s of a %s PDF: %s", name, what, e.Msg)
			default:
				t.Errorf("%s of a %s PDF: %v, want success or render_failed", name, what, err)
			}
		}
	}
}

// pdf-bookmarks writes an outline from JSON and reads it back the same,
// nested; pdf-merge's bookmarks read as JSON; bad JSON is refused before
// a sandbox, and a page past the end fails the job.
func TestPDFBookmarks(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.PDF("chapter", 4)
	marks := `[{"title":"Introduction","page":1},{"title":"Méthodes","page":2,"children":[{"title":"Échantillons","page":3}]},{"title":"Annexe","page":4}]`
	out, _ := renderOK(t, m, "pdf-bookmarks", input, map[string]any{"bookmarks": marks})
	written := out["output.pdf"]
	if got := pageTexts(t, m, written); !equal(got, labels("chapter", 1, 2, 3, 4)) {
		t.Errorf("the pages after writing bookmarks say %q", got)
	}
	out, _ = renderOK(t, m, "pdf-bookmarks", written, nil)
	var read struct {
		Bookmarks json.RawMessage `json:"bookmarks"`
	}
	if err := json.Unmarshal(out["bookmarks.json"], &read); err != nil {
		t.Fatalf("bookmarks.json: %v\n%s", err, out["bookmarks.json"])
	}
	var a, b any
	_ = json.Unmarshal([]byte(marks), &a)
	_ = json.Unmarshal(read.Bookmarks, &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("read back %s, want %s", read.Bookmarks, marks)
	}
	// None: an empty list.
	out, _ = renderOK(t, m, "pdf-bookmarks", input, nil)
	if got := strings.Join(strings.Fields(string(out["bookmarks.json"])), ""); got != `{"bookmarks":[]}` {
		t.Errorf("a PDF without bookmarks: %s", out["bookmarks.json"])
	}
	e := sandboxErr(t, m, "pdf-bookmarks", input, map[string]any{"bookmarks": `[{"title":"Too far","page":9}]`})
	if e.Outcome != sandbox.RenderFailed || !strings.Contains(e.Msg+e.Stderr, "page 9") {
		t.Errorf("a page past the end: %s %q, want render_failed naming page 9", e.Outcome, e.Msg)
	}
	r, _ := render.Lookup("pdf-bookmarks")
	deep := `[{"title":"1","page":1,"children":[{"title":"2","page":1,"children":[{"title":"3","page":1,"children":[{"title":"4","page":1,"children":[{"title":"5","page":1,"children":[{"title":"6","page":1,"children":[{"title":"7","page":1,"children":[{"title":"8","page":1,"children":[{"title":"9","page":1}]}]}]}]}]}]}]}]}]`
	for _, bad := range []string{`{}`, `[]`, `[{"title":"","page":1}]`, `[{"title":"x","page":0}]`, `[{"title":"x","page":1,"url":"http://x"}]`, `[{"title":"a\tb","page":1}]`, deep, `[1] [2]`} {
		if _, err := r.Prepare(input, map[string]any{"bookmarks": bad}, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("bookmarks %s: %v, want invalid options", bad, err)
		}
	}
}

// pdf-attach embeds each file under its name with its MIME type and the
// relationship, listed in /AF; the document's pages stay; a job without
// a file to embed, with a document that is no PDF, or with two files of
// one name is refused before a sandbox.
func TestPDFAttach(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	invoice := []byte(`<?xml version="1.0"?><Invoice><ID>2026-001</ID></Invoice>`)
	input := storedZip(t, zip.Store,
		[2][]byte{[]byte("invoice.pdf"), samples.PDF("invoice", 2)},
		[2][]byte{[]byte("factur-x.xml"), invoice},
		[2][]byte{[]byte("data/lines.csv"), []byte("item,qty\nbolt,4\n")})
	out, _ := renderOK(t, m, "pdf-attach", input, map[string]any{"relationship": "Data", "description": "the invoice's data"})
	pdf := out["output.pdf"]
	if got := pageTexts(t, m, pdf); !equal(got, labels("invoice", 1, 2)) {
		t.Errorf("the pages say %q", got)
	}
	list := testenv.Tool(t, m, "qpdf", pdf, "--list-attachments", "--verbose")
	for _, want := range []string{"factur-x.xml", "text/xml", "lines.csv", "text/csv", "the invoice's data"} {
		if !strings.Contains(list, want) {
			t.Errorf("qpdf --list-attachments lacks %q:\n%s", want, list)
		}
	}
	if got, err := toolOn(m, pdf, "/usr/bin/qpdf", "--show-attachment=factur-x.xml", wire.InputDir+"/in.pdf"); err != nil || got != string(invoice) {
		t.Errorf("the embedded XML: %v %q, want the file as sent", err, got)
	}
	var q struct {
		QPDF []map[string]any `json:"qpdf"`
	}
	if err := json.Unmarshal([]byte(testenv.Tool(t, m, "qpdf", pdf, "--json=2", "--json-key=qpdf")), &q); err != nil || len(q.QPDF) != 2 {
		t.Fatalf("qpdf --json: %v", err)
	}
	relations, af := 0, 0
	for _, o := range q.QPDF[1] {
		d, _ := o.(map[string]any)["value"].(map[string]any)
		if d["/AFRelationship"] == "/Data" {
			relations++
		}
		if list, ok := d["/AF"].([]any); ok && d["/Type"] == "/Catalog" {
			af = len(list)
		}
	}
	if relations != 2 || af != 2 {
		t.Errorf("%d file specifications say /AFRelationship /Data and the catalogue's /AF lists %d; want 2 and 2", relations, af)
	}
	r, _ := render.Lookup("pdf-attach")
	for name, bad := range map[string][]byte{
		"the PDF alone":       storedZip(t, zip.Store, [2][]byte{[]byte("a.pdf"), samples.PDF("a", 1)}),
		"no PDF first":        storedZip(t, zip.Store, [2][]byte{[]byte("a.xml"), invoice}, [2][]byte{[]byte("b.pdf"), samples.PDF("a", 1)}),
		"two files, one name": storedZip(t, zip.Store, [2][]byte{[]byte("a.pdf"), samples.PDF("a", 1)}, [2][]byte{[]byte("x/d.xml"), invoice}, [2][]byte{[]byte("y/d.xml"), invoice}),
	} {
		if _, err := r.Prepare(bad, nil, render.LimitRequest{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
