package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/apifake"
)

// -version prints the build, as api -version and worker -version do, and
// opens nothing: no server or key is needed.
func TestVersion(t *testing.T) {
	t.Setenv("RENDERBOX_SERVER", "")
	t.Setenv("RENDERBOX_KEY", "")
	t.Setenv("RENDERBOX_CONFIG", "/nonexistent")
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"-version"}, &out, &errb); err != nil {
		t.Fatalf("renderbox -version: %v %s", err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "renderbox ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("renderbox -version printed %q, want renderbox <version> … <Go release>", out.String())
	}
	if err := run(context.Background(), []string{"-version", "now"}, &out, &errb); !errors.Is(err, errUsage) {
		t.Errorf("renderbox -version now: %v, want the usage", err)
	}
}

// cli runs a command line against api (nil: no server) from dir and
// returns what it printed and its exit status.
func cli(t *testing.T, api *apifake.Server, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	t.Setenv("RENDERBOX_CONFIG", "/nonexistent")
	t.Setenv("RENDERBOX_KEY_FILE", "")
	t.Setenv("RENDERBOX_SERVER", "")
	t.Setenv("RENDERBOX_KEY", "")
	if api != nil {
		t.Setenv("RENDERBOX_SERVER", api.URL)
		t.Setenv("RENDERBOX_KEY", api.Key)
	}
	var o, e bytes.Buffer
	code = Main(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func fileNames(s apifake.Submission) string {
	var n []string
	for _, f := range s.Files {
		n = append(n, f.Name)
	}
	return strings.Join(n, " ")
}

const sitePage = `<link rel="stylesheet" href="css/style.css"><h1>Hi</h1><img src="img/logo.png">`

// The README's example: flags after the file work; the outputs land in
// -o and their paths are printed; progress goes queued, running, running
// in its sandbox (its mode shown once taken), then succeeded, each with
// the time taken.
func TestFlagsAnywhere(t *testing.T) {
	api := apifake.Start("rb_cli")
	defer api.Close()
	dir := t.TempDir()
	t.Chdir(dir)
	writeFiles(t, dir, map[string]string{"report.html": "<h1>Report</h1>"})
	stdout, stderr, code := cli(t, api, "render", "-r", "html-pdf", "-opt", "paper=a4", "report.html", "-o", "out/", "-output-name", "report")
	if code != 0 || strings.TrimSpace(stdout) != filepath.Join("out", "report.pdf") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "report.pdf")); err != nil {
		t.Error(err)
	}
	sub := api.Submissions()[0]
	if fileNames(sub) != "report.html" || sub.Fields["options"] != `{"paper":"a4"}` || sub.Fields["output_name"] != "report" {
		t.Errorf("sent %q %q", fileNames(sub), sub.Fields)
	}
	for _, want := range []string{": queued after ", ": running after ", ": running (pre-booted sandbox) after ", ": succeeded (pre-booted sandbox) after "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress %q lacks %q", stderr, want)
		}
	}
	if _, stderr, code := cli(t, api, "render", "report.html"); code != ExitUsage || !strings.Contains(stderr, "want -r RENDERER") {
		t.Errorf("no renderer: exit %d %q", code, stderr)
	}
	// After "--" everything is a file.
	if _, stderr, code := cli(t, api, "render", "-r", "html-pdf", "--", "-o"); code != ExitError || !strings.Contains(stderr, "-o: no such file") {
		t.Errorf("a file named -o after --: exit %d %q", code, stderr)
	}
}

// -h, --help and help print the usage once, on stdout, and exit 0, for
// the program and every command.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"jobs", "-h"}, {"help", "render"}, {"help", "jobs", "ls"},
		{"render", "-h"}, {"render", "--help"}, {"render", "-r", "x", "a.html", "-h"}, {"jobs", "ls", "-h"}, {"jobs", "get", "--help"},
		{"jobs", "cancel", "-h"}, {"renderers", "-h"}} {
		stdout, stderr, code := cli(t, nil, args...)
		if code != 0 || strings.Count(stdout, "usage: renderbox") != 1 || stderr != "" {
			t.Errorf("renderbox %q: exit %d, usage printed %d times, stderr %q", args, code, strings.Count(stdout, "usage: renderbox"), stderr)
		}
		if len(args) > 1 && args[0] != "jobs" || args[0] == "jobs" && len(args) > 2 {
			if !strings.Contains(stdout, "flags:") || !strings.Contains(stdout, "-server") {
				t.Errorf("renderbox %q: no flags in %q", args, stdout)
			}
		}
	}
	// A mistake: the usage once, on stderr, exit 2.
	for _, args := range [][]string{{}, {"nonsense"}, {"render", "-bogus"}, {"jobs"}, {"jobs", "get"}, {"help", "nonsense"}} {
		_, stderr, code := cli(t, nil, args...)
		if code != ExitUsage || strings.Count(stderr, "usage: renderbox") != 1 {
			t.Errorf("renderbox %q: exit %d, %q; want 2 with the usage once", args, code, stderr)
		}
	}
}

// Files keep the paths given; a directory goes as its tree, index.html
// first; what the page misses, and its requests refused, are warnings,
// and an error with -strict.
func TestFilesKeepTheirPaths(t *testing.T) {
	api := apifake.Start("rb_cli")
	defer api.Close()
	dir := t.TempDir()
	t.Chdir(dir)
	writeFiles(t, dir, map[string]string{"site/index.html": sitePage, "site/css/style.css": "h1{}", "site/img/logo.png": "png"})
	if stdout, stderr, code := cli(t, api, "render", "-r", "html-pdf", "site/", "-o", "out"); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("a directory: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := fileNames(api.Submissions()[0]); got != "index.html css/style.css img/logo.png" {
		t.Errorf("the directory was sent as %q", got)
	}
	t.Chdir(filepath.Join(dir, "site"))
	if _, stderr, code := cli(t, api, "render", "-r", "html-pdf", "index.html", "css/style.css", "img/logo.png", "-o", "../out"); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("three files: exit %d %s", code, stderr)
	}
	if got := fileNames(api.Submissions()[1]); got != "index.html css/style.css img/logo.png" {
		t.Errorf("the files were sent as %q", got)
	}
	// Without the image: a warning, exit 0; with -strict, exit 6.
	_, stderr, code := cli(t, api, "render", "-r", "html-pdf", "index.html", "css/style.css", "-o", "../out")
	if code != 0 || !strings.Contains(stderr, "warning: the page asked for") || !strings.Contains(stderr, "img/logo.png") {
		t.Errorf("a missing image: exit %d %q, want 0 with a warning naming it", code, stderr)
	}
	if _, stderr, code := cli(t, api, "render", "-strict", "-r", "html-pdf", "index.html", "-o", "../out"); code != ExitWarnings || !strings.Contains(stderr, "css/style.css") {
		t.Errorf("-strict with missing files: exit %d %q, want %d", code, stderr, ExitWarnings)
	}
	// A request off the page's origin, refused: the same.
	writeFiles(t, dir, map[string]string{"site/tracker.html": `<h1>Hi</h1><img src="https://tracker.example/p.gif">`})
	_, stderr, code = cli(t, api, "render", "-r", "html-pdf", "tracker.html", "-o", "../out")
	if code != 0 || !strings.Contains(stderr, "warning: the page's request for https://tracker.example/p.gif was refused") {
		t.Errorf("a refused request: exit %d %q, want 0 with a warning naming it", code, stderr)
	}
	if _, stderr, code := cli(t, api, "render", "-strict", "-r", "html-pdf", "tracker.html", "-o", "../out"); code != ExitWarnings || !strings.Contains(stderr, "tracker.example") {
		t.Errorf("-strict with a refused request: exit %d %q, want %d", code, stderr, ExitWarnings)
	}
}

// -input-type, -then (with options, and -opt STEP.NAME), -limit and
// -download-from reach the request; -opt values take the catalogue's
// types. -url reaches it too.
func TestRequestFlags(t *testing.T) {
	api := apifake.Start("rb_cli")
	defer api.Close()
	dir := t.TempDir()
	t.Chdir(dir)
	writeFiles(t, dir, map[string]string{"a.html": "<p>a"})
	stdout, stderr, code := cli(t, api, "render", "a.html", "-r", "html-pdf", "-input-type", "text/html",
		"-then", `pdf-protect:{"owner_password":"o"}`, "-opt", "pdf-protect.user_password=u", "-limit", "timeout_seconds=10",
		"-download-from", "https://example.com/x.png", "-download-from", "https://example.com/y.png",
		"-opt", "page_ranges=1", "-opt", "scale=1.5", "-opt", "landscape=true", "-opt", "paper=A4")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	f := api.Submissions()[0].Fields
	var opts map[string]any
	_ = json.Unmarshal([]byte(f["options"]), &opts)
	if f["input_type"] != "text/html" || f["limits"] != `{"timeout_seconds":10}` ||
		f["then"] != `[{"renderer":"pdf-protect","options":{"owner_password":"o","user_password":"u"}}]` ||
		f["download_from"] != `[{"url":"https://example.com/x.png"},{"url":"https://example.com/y.png"}]` ||
		opts["page_ranges"] != "1" || opts["scale"] != 1.5 || opts["landscape"] != true || opts["paper"] != "A4" {
		t.Errorf("fields sent: %q", f)
	}
	if stdout, stderr, code := cli(t, api, "render", "-r", "html-png", "-url", "https://example.com/page"); code != 0 {
		t.Fatalf("-url: exit %d\n%s%s", code, stdout, stderr)
	}
	if subs := api.Submissions(); subs[len(subs)-1].Fields["url"] != "https://example.com/page" || len(subs[len(subs)-1].Files) != 0 {
		t.Errorf("-url sent fields %q and %d files", subs[len(subs)-1].Fields, len(subs[len(subs)-1].Files))
	}
	for _, c := range []struct{ opt, want string }{
		{"dpi=abc", `want an integer, got "abc"`},
		{"dpi=5000", `want 36 to 600, got "5000"`},
		{"format=gif", "want one of png, jpeg"},
		{"colour=red", `pdf-png has no option "colour"; it takes: `},
	} {
		_, stderr, code := cli(t, api, "render", "-r", "pdf-png", "-opt", c.opt, "a.html")
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("-opt %s: exit %d %q, want 2 and %q", c.opt, code, stderr, c.want)
		}
	}
	// A secret's mistake does not repeat its value.
	if _, err := coerce(client.Option{Name: "pin", Type: "integer", Secret: true}, "hunter2"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a secret's type error: %v", err)
	}
}

// renderbox renderers fits 100 columns and NAME shows each option's
// type, default and bounds (a secret's pattern left out).
func TestRenderersReadable(t *testing.T) {
	api := apifake.Start("rb_cli")
	defer api.Close()
	list, stderr, code := cli(t, api, "renderers")
	if code != 0 || !strings.Contains(list, "html-pdf") || !strings.Contains(list, "svg-png") {
		t.Fatalf("exit %d\n%s%s", code, list, stderr)
	}
	one, _, code := cli(t, api, "renderers", "html-pdf")
	if code != 0 || !regexp.MustCompile(`(?m)^  paper  string  default "letter"\n      one of letter, .*a4.* \(any case\)$`).MatchString(one) ||
		!regexp.MustCompile(`(?m)^  scale  number  default 1\n      0\.1 to 2$`).MatchString(one) {
		t.Errorf("renderbox renderers html-pdf:\n%s", one)
	}
	protect, _, _ := cli(t, api, "renderers", "pdf-protect")
	if !strings.Contains(protect, "secret: shown nowhere") || strings.Contains(protect, "matching") {
		t.Errorf("renderbox renderers pdf-protect:\n%s", protect)
	}
	for _, out := range []string{list, one, protect} {
		for _, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > 100 {
				t.Errorf("a line of %d columns: %q", n, l)
			}
		}
	}
	if _, stderr, code := cli(t, api, "renderers", "nope"); code != ExitUsage || !strings.Contains(stderr, "html-pdf") {
		t.Errorf("an unknown renderer: exit %d %q", code, stderr)
	}
}

// Exit statuses tell a failed job, a refusal and a server that is not
// there apart.
func TestExitCodes(t *testing.T) {
	api := apifake.Start("rb_cli")
	defer api.Close()
	dir := t.TempDir()
	t.Chdir(dir)
	writeFiles(t, dir, map[string]string{"broken.pdf": "%PDF-1.4\n1 0 obj", "a.svg": "<svg/>"})
	if _, stderr, code := cli(t, api, "render", "-r", "pdf-png", "broken.pdf"); code != ExitJobFailed || !strings.Contains(stderr, "render_failed") {
		t.Errorf("a failed job: exit %d %q, want %d naming render_failed", code, stderr, ExitJobFailed)
	}
	if _, stderr, code := cli(t, api, "render", "-r", "svg-pdfx", "a.svg"); code != ExitRefused || !strings.Contains(stderr, "unknown_renderer") {
		t.Errorf("a refused request: exit %d %q, want %d", code, stderr, ExitRefused)
	}
	if _, stderr, code := cli(t, &apifake.Server{Server: api.Server, Key: "wrong"}, "jobs", "ls"); code != ExitRefused || !strings.Contains(stderr, "401") {
		t.Errorf("a wrong key: exit %d %q, want %d", code, stderr, ExitRefused)
	}
	if _, stderr, code := cli(t, api, "render", "-r", "svg-png", "gone.svg"); code != ExitError || !strings.Contains(stderr, "no such file") {
		t.Errorf("a missing file: exit %d %q, want %d", code, stderr, ExitError)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	down := &apifake.Server{Server: &httptest.Server{URL: "http://" + l.Addr().String()}, Key: "rb_cli"}
	start := time.Now()
	_, stderr, code := cli(t, down, "render", "-retry", "1s", "-r", "svg-png", "a.svg")
	if code != ExitUnreachable || !strings.Contains(stderr, "submit attempt 1 failed") || !strings.Contains(stderr, "gave up after") || time.Since(start) > 3*time.Second {
		t.Errorf("a server that is down: exit %d after %s, %q; want %d with the attempts", code, time.Since(start), stderr, ExitUnreachable)
	}
	if _, _, code := cli(t, down, "renderers"); code != ExitUnreachable {
		t.Errorf("renderers with the server down: exit %d, want %d", code, ExitUnreachable)
	}
	dns := &url.Error{Op: "Get", URL: "http://renderbox.invalid/v1/renderers", Err: &net.DNSError{Err: "no such host", Name: "renderbox.invalid", IsNotFound: true}}
	if code := ExitCode(dns); code != ExitUnreachable {
		t.Errorf("a host that does not resolve: exit %d, want %d", code, ExitUnreachable)
	}
	if _, stderr, code := cli(t, nil, "jobs", "ls"); code != ExitError || !strings.Contains(stderr, "no server") {
		t.Errorf("without a server: exit %d %q", code, stderr)
	}
}
