//go:build !unit

package main_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/testenv/exe"
	"github.com/renderbox/renderbox/internal/wire"
)

var workerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "worker-test-")
	if err != nil {
		panic(err)
	}
	workerBin = filepath.Join(dir, "worker")
	if out, err := exec.Command("go", "build", "-o", workerBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building worker: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testenv.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// isolated returns flags giving the worker a private state dir and cgroup
// parent, and registers the leftover check for them.
func isolated(t *testing.T) []string {
	t.Helper()
	m := testenv.Manager(t, sandbox.Config{})
	c := m.Config()
	return []string{"-state-dir", c.StateDir, "-cgroup-parent", c.CgroupParent, "-runsc", c.Runsc}
}

func worker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(workerBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestCheckPassesOnAGoodHost(t *testing.T) {
	t.Parallel()
	args := append([]string{"check"}, isolated(t)...)
	out, err := worker(t, append(args, "-rootfs", testenv.RootfsTree(t))...)
	if err != nil {
		t.Fatalf("worker check failed: %v\n%s", err, out)
	}
	// "no swap": each sandbox's cgroup, read on the host, allows no swap
	// past its memory limit (a pooled one's lowered to its job's).
	for _, want := range []string{"PASS  runsc version", "PASS  swap ", "PASS  rootfs manifest", "PASS  rootfs image", "PASS  gVisor kernel", "PASS  no route to the host",
		"PASS  no swap  ", "PASS  no swap (prebooted)", "PASS  no swap (restored)", "worker: ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("output has a FAIL:\n%s", out)
	}
}

func TestRefusesToStartWithoutRunsc(t *testing.T) {
	t.Parallel()
	out, err := worker(t, "check", "-runsc", "/nonexistent/runsc", "-rootfs", testenv.RootfsTree(t))
	if err == nil {
		t.Fatalf("worker started without runsc:\n%s", out)
	}
	if !strings.Contains(out, "runsc not found") || !strings.Contains(out, "go install gvisor.dev/gvisor/runsc@") ||
		!strings.Contains(out, "refusing to start") {
		t.Errorf("refusal does not say what is missing and how to get it:\n%s", out)
	}
}

func TestRefusesToStartWithAnOldRunsc(t *testing.T) {
	t.Parallel()
	fake := filepath.Join(t.TempDir(), "runsc")
	exe.Write(t, fake, "#!/bin/sh\necho 'runsc version release-20220425.0'\n")
	out, err := worker(t, "check", "-runsc", fake, "-rootfs", testenv.RootfsTree(t))
	if err == nil || !strings.Contains(out, "older than the pinned minimum") {
		t.Fatalf("worker check with a 2022 runsc: %v\n%s", err, out)
	}
}

// tinyTree is a tree in a temporary directory holding the built tree's
// agent and files (0755 each), not yet sealed.
func tinyTree(t *testing.T, files map[string][]byte) (tree, root string) {
	t.Helper()
	tree = t.TempDir()
	root = rootfs.Dir(tree)
	agent, err := os.ReadFile(filepath.Join(testenv.RootfsDir(t), rootfs.AgentPath))
	if err != nil {
		t.Fatal(err)
	}
	files[rootfs.AgentPath] = agent
	for path, data := range files {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tree, root
}

func TestRefusesToStartWithATamperedRootfs(t *testing.T) {
	t.Parallel()
	tree, root := tinyTree(t, map[string][]byte{"usr/bin/pdftoppm": []byte("renderer"), "etc/fonts/fonts.conf": []byte("<fontconfig/>")})
	if _, err := rootfs.Seal(tree, "test", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := rootfs.Verify(tree); err != nil {
		t.Fatalf("a freshly sealed tree does not verify: %v", err)
	}
	// An attacker swaps a renderer binary.
	if err := os.WriteFile(filepath.Join(root, "usr/bin/pdftoppm"), []byte("backdoor"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := worker(t, append([]string{"check", "-rootfs", tree}, isolated(t)...)...)
	if err == nil {
		t.Fatalf("worker started on a tampered rootfs:\n%s", out)
	}
	if !strings.Contains(out, "FAIL  rootfs digest") || !strings.Contains(out, "does not match its manifest") {
		t.Errorf("refusal does not name the tampered rootfs:\n%s", out)
	}
	// A mode change alone (a setuid bit) is tampering too.
	_ = os.WriteFile(filepath.Join(root, "usr/bin/pdftoppm"), []byte("renderer"), 0o755)
	if _, err := rootfs.Verify(tree); err != nil {
		t.Fatalf("restored tree does not verify: %v", err)
	}
	if err := os.Chmod(filepath.Join(root, "usr/bin/pdftoppm"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if _, err := rootfs.Verify(tree); err == nil {
		t.Error("a setuid bit added to the tree went unnoticed")
	}
}

// With the rootfs image the sandboxes read the image, checked against the
// manifest, and of the tree only the mask file: a changed file elsewhere
// in the tree is no refusal there (it is without the image), a changed
// mask file is.
func TestImageModeChecksTheImageAndTheMaskFile(t *testing.T) {
	t.Parallel()
	tree, root := tinyTree(t, map[string][]byte{"usr/bin/pdftoppm": []byte("renderer"), strings.TrimPrefix(sandbox.MaskFile, "/"): nil})
	if err := os.Chmod(filepath.Join(root, sandbox.MaskFile), 0o444); err != nil {
		t.Fatal(err)
	}
	m, err := rootfs.Seal(tree, "test", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rootfs.MakeImage(tree, m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/pdftoppm"), []byte("backdoor"), 0o755); err != nil {
		t.Fatal(err)
	}
	// (The tiny tree then fails its self-test: not what this is about.)
	out, _ := worker(t, append([]string{"check", "-rootfs", tree}, isolated(t)...)...)
	if !strings.Contains(out, "PASS  rootfs manifest") || !strings.Contains(out, "PASS  rootfs image") || strings.Contains(out, "FAIL  rootfs") {
		t.Errorf("with the image, a tree file no sandbox opens was checked:\n%s", out)
	}
	out, _ = worker(t, append([]string{"check", "-rootfs", tree, "-no-rootfs-image"}, isolated(t)...)...)
	if !strings.Contains(out, "FAIL  rootfs digest") || !strings.Contains(out, "does not match its manifest") {
		t.Errorf("without the image, the changed tree was not refused:\n%s", out)
	}
	if err := os.Chmod(filepath.Join(root, sandbox.MaskFile), 0o666); err != nil {
		t.Fatal(err)
	}
	out, err = worker(t, append([]string{"check", "-rootfs", tree}, isolated(t)...)...)
	if err == nil || !strings.Contains(out, "FAIL  rootfs manifest") || !strings.Contains(out, "the mask file") {
		t.Errorf("a writable mask file was not refused:\n%s", out)
	}
}

// A rootfs whose packages are over a week old is named at start; past the
// operator's -rootfs-max-age the worker refuses it.
func TestOldRootfsIsWarnedThenRefused(t *testing.T) {
	t.Parallel()
	tree, _ := tinyTree(t, map[string][]byte{})
	if _, err := rootfs.Seal(tree, "test", nil, time.Now().Add(-10*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Warned (the tiny tree then fails its self-test: not what this is about).
	out, _ := worker(t, append([]string{"check", "-rootfs", tree}, isolated(t)...)...)
	if !strings.Contains(out, "WARN  rootfs age") || !strings.Contains(out, "10.0 days ago") {
		t.Errorf("no warning for a 10-day-old rootfs:\n%s", out)
	}
	out, err := worker(t, append([]string{"check", "-rootfs", tree, "-rootfs-max-age", "168h"}, isolated(t)...)...)
	if err == nil || !strings.Contains(out, "FAIL  rootfs age") || strings.Contains(out, "self-test") {
		t.Errorf("a 10-day-old rootfs past -rootfs-max-age 168h: %v\n%s", err, out)
	}
}

// secondsRE is a phase's time in a summary: a number of seconds.
var secondsRE = regexp.MustCompile(`"render": \d+\.\d+,`)

func TestRenderCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inputs := map[string][]byte{
		"doc.pdf":   samples.PDF("renderbox", 2),
		"red.svg":   samples.SVG(64, 32, 0, 0, 16),
		"page.html": samples.HTML("Render command", "End to end through worker render."),
	}
	for name, data := range inputs {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flags := append(isolated(t), "-rootfs", testenv.RootfsTree(t))
	for _, tc := range []struct {
		renderer, input string
		outputs         []string
	}{
		{"pdf-png", "doc.pdf", []string{"page-1.png", "page-2.png"}},
		{"svg-png", "red.svg", []string{"output.png"}},
		{"html-pdf", "page.html", []string{"output.pdf"}},
	} {
		outDir := filepath.Join(dir, tc.renderer)
		args := append([]string{"render"}, flags...)
		args = append(args, "-renderer", tc.renderer, filepath.Join(dir, tc.input), "-o", outDir)
		out, err := worker(t, args...)
		if err != nil {
			t.Fatalf("worker render %s: %v\n%s", tc.renderer, err, out)
		}
		if !strings.Contains(out, `"outcome": "succeeded"`) {
			t.Errorf("%s: summary lacks the outcome:\n%s", tc.renderer, out)
		}
		// Durations in seconds, as the logs give them, not "1.234ms".
		if !strings.Contains(out, `"timings_seconds": {`) || !secondsRE.MatchString(out) || strings.Contains(out, `ms"`) {
			t.Errorf("%s: summary's timings are not in seconds:\n%s", tc.renderer, out)
		}
		for _, name := range tc.outputs {
			b, err := os.ReadFile(filepath.Join(outDir, name))
			if err != nil {
				t.Errorf("%s: %v", tc.renderer, err)
				continue
			}
			switch filepath.Ext(name) {
			case ".png":
				if _, err := png.Decode(bytes.NewReader(b)); err != nil {
					t.Errorf("%s: %s is not a PNG: %v", tc.renderer, name, err)
				}
			case ".pdf":
				if !bytes.HasPrefix(b, []byte("%PDF-")) {
					t.Errorf("%s: %s is not a PDF", tc.renderer, name)
				}
			}
		}
	}
}

func TestRenderRejectsAWrongTypeBeforeAnySandbox(t *testing.T) {
	t.Parallel()
	in := filepath.Join(t.TempDir(), "fake.pdf")
	_ = os.WriteFile(in, samples.HTML("not", "a pdf"), 0o644)
	out, err := worker(t, "render", "-rootfs", testenv.RootfsTree(t), "-runsc", "/nonexistent", "-renderer", "pdf-png", in, "-o", t.TempDir())
	if err == nil || !strings.Contains(out, "unsupported input") {
		t.Errorf("render of HTML as pdf-png: %v\n%s", err, out)
	}
}

// worker check beside a running worker (here this test's manager, holding
// the state dir's lock as `worker serve` does, with a job running) leaves
// that worker's sandboxes alone: no reap, its self-test in a state dir of
// its own; the job finishes untouched. worker reap refuses outright.
func TestCheckLeavesALiveWorkerAlone(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	unlock, err := m.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	c := m.Config()
	flags := []string{"-state-dir", c.StateDir, "-cgroup-parent", c.CgroupParent, "-runsc", c.Runsc, "-rootfs", testenv.RootfsTree(t)}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		res, err := m.Run(ctx, sandbox.Job{
			Request: wire.Request{Mode: wire.ModeRender, Argv: []string{"/bin/sh", "-c", "sleep 30; echo ok > /tmp/out/ok"}, InputName: "input"},
			Limits:  sandbox.Limits{Timeout: 2 * time.Minute},
		})
		if err == nil && len(res.Response.Files) != 1 {
			err = fmt.Errorf("outputs %v, want ok", res.Response.Files)
		}
		done <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if cs, _ := m.Runsc().List(ctx); len(cs) == 1 && cs[0].Status == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job's sandbox is not running after 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := worker(t, append([]string{"check"}, flags...)...)
	if err != nil || !strings.Contains(out, "SKIP  reap") || !strings.Contains(out, "worker: ready") {
		t.Errorf("worker check beside a live worker: %v\n%s", err, out)
	}
	out, err = worker(t, append([]string{"reap"}, flags...)...)
	if err == nil || !strings.Contains(out, "in use by a running worker") {
		t.Errorf("worker reap beside a live worker: %v\n%s", err, out)
	}
	// A second worker on the same state dir refuses before it reaps or
	// takes any job (before it even dials Redis).
	out, err = worker(t, append([]string{"serve", "-redis", "127.0.0.1:1", "-metrics-addr", "", "-pool-size", "none"}, flags...)...)
	if err == nil || !strings.Contains(out, `"check":"state dir lock","verdict":"fail"`) || strings.Contains(out, `"check":"reap"`) {
		t.Errorf("worker serve beside a live worker: %v\n%s", err, out)
	}
	if err := <-done; err != nil {
		t.Errorf("the live worker's job: %v", err)
	}
}

// worker rootfs export and import, as deploy/README.md runs them: the
// archive and its .sha256 land in -o; import finds the .sha256 beside the
// archive, installs the tree under -dir and switches current; an archive
// its .sha256 does not describe is refused and current stays.
func TestRootfsExportImportCommands(t *testing.T) {
	t.Parallel()
	tree := t.TempDir()
	p := filepath.Join(rootfs.Dir(tree), rootfs.AgentPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := worker(t, "rootfs", "seal", tree); err != nil {
		t.Fatalf("seal: %v\n%s", err, out)
	}
	out, dir := t.TempDir(), filepath.Join(t.TempDir(), "rootfs")
	if o, err := worker(t, "rootfs", "export", "-o", out, tree); err != nil {
		t.Fatalf("export: %v\n%s", err, o)
	}
	archives, _ := filepath.Glob(filepath.Join(out, rootfs.ArchivePrefix+"*"+rootfs.ArchiveSuffix))
	if len(archives) != 1 {
		t.Fatalf("export wrote %v, want one archive", archives)
	}
	if o, err := worker(t, "rootfs", "import", "-dir", dir, archives[0]); err != nil || !strings.Contains(o, "extracted and verified") {
		t.Fatalf("import: %v\n%s", err, o)
	}
	if o, err := worker(t, "rootfs", "verify", filepath.Join(dir, rootfs.CurrentName)); err != nil {
		t.Errorf("verify the imported current: %v\n%s", err, o)
	}
	// Import made the imported tree's image, and it verifies.
	current := filepath.Join(dir, rootfs.CurrentName)
	if m, err := rootfs.ReadManifest(current); err != nil {
		t.Error(err)
	} else if img, _, err := rootfs.VerifyImage(current, m); err != nil || img == "" {
		t.Errorf("the imported tree's image: %q, %v; want one that verifies", img, err)
	}
	before, _ := os.Readlink(filepath.Join(dir, rootfs.CurrentName))

	wrong := filepath.Join(t.TempDir(), filepath.Base(archives[0]))
	b, _ := os.ReadFile(archives[0])
	_ = os.WriteFile(wrong, append(b, 0), 0o644)
	sum, _ := os.ReadFile(archives[0] + ".sha256")
	_ = os.WriteFile(wrong+".sha256", sum, 0o644)
	if o, err := worker(t, "rootfs", "import", "-dir", dir, wrong); err == nil || !strings.Contains(o, "rootfs archive refused") {
		t.Errorf("import of an archive its .sha256 does not describe: %v\n%s", err, o)
	}
	if after, _ := os.Readlink(filepath.Join(dir, rootfs.CurrentName)); after != before {
		t.Errorf("current -> %s after a refused import, want %s", after, before)
	}

	// A tampered tree makes no image.
	if err := os.WriteFile(p, []byte("another agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if o, err := worker(t, "rootfs", "image", tree); err == nil || !strings.Contains(o, "does not match its manifest") {
		t.Errorf("image of a tampered tree: %v\n%s", err, o)
	}
	if _, err := os.Stat(filepath.Join(tree, rootfs.ImageName)); err == nil {
		t.Errorf("a tampered tree got an image")
	}
}

// A command the worker does not know is refused with the usage and exit
// status 2, before the worker looks at runsc, a state dir or Redis;
// -version prints the build.
func TestCommandLine(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	for _, c := range []struct {
		args   []string
		code   int
		stdout string // a prefix of stdout
		stderr string // a part of stderr
	}{
		{args: []string{"version"}, code: 2, stderr: "usage: worker"},
		{args: []string{"nonsense", "-state-dir", state}, code: 2, stderr: `unknown command "nonsense"`},
		{args: []string{"serve", "-state-dir", state, "now"}, code: 2, stderr: `worker serve takes no arguments, got "now"`},
		{args: []string{"reap", "-state-dir", state, "all"}, code: 2, stderr: "usage: worker"},
		{args: nil, code: 2, stderr: "usage: worker"},
		{args: []string{"-version"}, code: 0, stdout: "worker "},
		{args: []string{"help"}, code: 0, stdout: "usage: worker"},
	} {
		cmd := exec.Command(workerBin, c.args...)
		cmd.Env = append(os.Environ(), "RENDERBOX_REDIS=127.0.0.1:1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		if got := cmd.ProcessState.ExitCode(); got != c.code || !strings.HasPrefix(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("worker %s: got exit %d, stdout %q, stderr %q; want %d, stdout starting %q, stderr holding %q",
				strings.Join(c.args, " "), got, stdout.String(), stderr.String(), c.code, c.stdout, c.stderr)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the state dir %s was made (stat: %v), want nothing touched", state, err)
	}
}

// worker selftest lists, cold, pre-booted and restored, each sandbox's
// swap limit and the renderers' fresh entropy: two Chromium jobs of each
// mode, the restored ones from one image, draw different numbers.
func TestSelftestListsSwapAndFreshEntropy(t *testing.T) {
	t.Parallel()
	args := append([]string{"selftest"}, isolated(t)...)
	out, err := worker(t, append(args, "-rootfs", testenv.RootfsTree(t))...)
	if err != nil {
		t.Fatalf("worker selftest failed: %v\n%s", err, out)
	}
	t.Logf("worker selftest:\n%s", out)
	for _, want := range []string{"PASS  no swap  ", "PASS  no swap (prebooted)", "PASS  no swap (restored)",
		"PASS  fresh entropy (cold)", "PASS  fresh entropy (prebooted)", "PASS  fresh entropy (restored)",
		"isolation properties hold"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("output has a FAIL:\n%s", out)
	}
}
