package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/envflag"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// renderArgs are render's flags that name its job, not a setting: they
// have no variable.
var renderArgs = []string{"renderer", "o", "options", "limits", "input-type"}

// deprecatedVars are variables once named otherwise than their flag,
// still read (the new name wins) and warned about.
var deprecatedVars = []envflag.Deprecated{{Var: "RENDERBOX_WORKER_METRICS", Flag: "metrics-addr"}}

// warnDeprecated logs each old variable c was read from.
func (c Config) warnDeprecated(log *slog.Logger) {
	for _, d := range c.deprecated {
		log.Warn("a deprecated environment variable is set; rename it", "variable", d.Var, "use", d.Use())
	}
}

// parse binds the shared flags plus extra ones and returns the validated
// config and the positional arguments.
func parse(name string, args []string, extra func(*flag.FlagSet)) (Config, []string, error) {
	var c Config
	fs := flag.NewFlagSet("worker "+name, flag.ContinueOnError)
	c.bind(fs)
	if extra != nil {
		extra(fs)
	}
	// Flags may come before or after positional arguments:
	// "render -renderer x in.pdf -o out/".
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return c, nil, err
			}
			return c, nil, usageError(err.Error())
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	// Only render takes an argument (its input); a stray word elsewhere
	// ("worker serve now") is refused before anything is looked at, as an
	// unknown command is.
	if name != "render" && len(rest) > 0 {
		return c, rest, usageError(fmt.Sprintf("worker %s takes no arguments, got %q", name, rest[0]))
	}
	used, err := envflag.Apply(fs, deprecatedVars, renderArgs...)
	if err != nil {
		return c, rest, err
	}
	c.deprecated = used
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return c, rest, err
	}
	// The rootfs is resolved once: a `make rootfs` that moves "current"
	// later does not change the tree this worker verified and runs (it
	// takes the new one when restarted; deploy/README.md).
	tree, err := filepath.EvalSymlinks(c.Rootfs)
	if err != nil {
		return c, rest, fmt.Errorf("config: rootfs %s: %w", c.Rootfs, err)
	}
	c.Rootfs = tree
	return c, rest, nil
}

// checkReport is where the start-up checks' verdicts (PASS, FAIL, WARN,
// SKIP) go: lines of text for a person (worker check, selftest), or JSON
// log records for worker serve, whose log is JSON from its first line.
// width aligns the text's names.
type checkReport func(verdict, name, detail string, width int)

// textReport writes "PASS  name  detail" lines to out.
func textReport(out io.Writer) checkReport {
	return func(verdict, name, detail string, width int) {
		fmt.Fprintf(out, "%s  %-*s %s\n", verdict, width, name, detail)
	}
}

// logReport logs each verdict as a "start-up check" record: a FAIL at
// error level, a WARN at warn, the rest at info.
func logReport(log *slog.Logger) checkReport {
	return func(verdict, name, detail string, _ int) {
		level := slog.LevelInfo
		switch verdict {
		case "FAIL":
			level = slog.LevelError
		case "WARN":
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "start-up check", "check", name, "verdict", strings.ToLower(verdict), "detail", detail)
	}
}

// preflight is what the worker does before it takes any job; any failure
// means it must not start. It returns the ready manager, which holds the
// state dir's lock until the process exits: a worker whose state dir
// another worker holds refuses to start. pooled adds the self-test of
// pooled and restored sandboxes.
func preflight(ctx context.Context, c Config, log *slog.Logger, rep checkReport, pooled bool) (*sandbox.Manager, verified, error) {
	return preflightAs(ctx, c, log, rep, pooled, true)
}

// verified is what preflight checked that the worker reports of itself
// (its heartbeat, GET /v1/workers).
type verified struct {
	runsc  string // runsc's version
	rootfs string // the rootfs tree's digest, recomputed
}

// preflightAs is preflight; a caller that is not going to serve (worker
// check) passes serving false: beside a running worker it then leaves that
// worker's state dir alone (no reap) and runs the self-test in a private
// state dir and cgroup parent of its own, removed afterwards.
func preflightAs(ctx context.Context, c Config, log *slog.Logger, rep checkReport, pooled, serving bool) (*sandbox.Manager, verified, error) {
	var facts verified
	step := func(name string, err error, detail string) error {
		if err != nil {
			rep("FAIL", name, err.Error(), 16)
			return fmt.Errorf("refusing to start: %s: %w", name, err)
		}
		rep("PASS", name, detail, 16)
		return nil
	}
	m, err := c.manager(log)
	if err := step("runsc located", err, ""); err != nil {
		return nil, facts, err
	}
	v, err := sandbox.CheckVersion(ctx, m.Runsc().Path)
	if err := step("runsc version", err, m.Runsc().Path+" "+v.Raw); err != nil {
		return nil, facts, err
	}
	facts.runsc = v.Raw
	if err := step("cgroups", sandbox.CheckCgroups(), "memory, cpu and pids controllers present"); err != nil {
		return nil, facts, err
	}
	// The self-test reads a real sandbox's swap limit; this says whether
	// the kernel can hold one.
	if limited, detail, err := sandbox.CheckSwap(); err != nil || limited {
		if err := step("swap", err, detail); err != nil {
			return nil, facts, err
		}
	} else {
		rep("WARN", "swap", detail, 16)
	}
	// Not a refusal: without huge pages the sandboxes are slower, not
	// less isolated.
	if ok, detail := sandbox.HugePages(); ok {
		rep("PASS", "huge pages", detail, 16)
	} else {
		rep("WARN", "huge pages", detail+" (sandboxes run without huge pages)", 16)
	}
	t := time.Now()
	man, err := rootfs.Verify(c.Rootfs)
	detail := ""
	if man != nil {
		detail = fmt.Sprintf("%s tree %s… (%d files, %.1fs)", c.Rootfs, man.TreeSHA256[:12], man.Files, time.Since(t).Seconds())
	}
	if err := step("rootfs digest", err, detail); err != nil {
		return nil, facts, err
	}
	facts.rootfs = man.TreeSHA256
	if img := c.rootfsImage(); img != "" {
		t = time.Now()
		_, rec, err := rootfs.VerifyImage(c.Rootfs, man)
		detail := ""
		if rec != nil {
			detail = fmt.Sprintf("%s %s… (%d MiB, %.1fs): the Sentry mounts it as the root, no gofer", img, rec.SHA256[:12], rec.Bytes>>20, time.Since(t).Seconds())
		}
		if err := step("rootfs image", err, detail); err != nil {
			return nil, facts, err
		}
	} else if !c.NoRootfsImage {
		rep("WARN", "rootfs image", "none beside "+c.Rootfs+": sandboxes mount the tree through the gofer, light jobs run slower (make it with: worker rootfs image "+c.Rootfs+")", 16)
	}
	if err := rootfsAge(rep, man, c.RootfsMaxAge, time.Now()); err != nil {
		return nil, facts, err
	}
	own, busy, cleanup, err := c.lockOrPrivate(m, serving, log)
	if busy != nil {
		rep("SKIP", "reap", busy.Error()+": its sandboxes are left alone; the self-test runs in a state dir of its own", 16)
		if err := step("private state", err, ""); err != nil {
			return nil, facts, err
		}
	} else {
		if err := step("state dir lock", err, c.StateDir); err != nil {
			return nil, facts, err
		}
		n, err := m.Reap(ctx)
		if err := step("reap", err, fmt.Sprintf("%d leftover sandboxes deleted", n)); err != nil {
			return nil, facts, err
		}
	}
	defer cleanup()
	m = own
	checks, err := m.SelfTest(ctx, pooled)
	if err := step("self-test", err, ""); err != nil {
		return nil, facts, err
	}
	printChecks(rep, checks)
	if f := sandbox.Failed(checks); len(f) > 0 {
		return nil, facts, fmt.Errorf("refusing to start: self-test: %d isolation properties failed (first: %s: %s)", len(f), f[0].Name, f[0].Detail)
	}
	return m, facts, nil
}

// rootfsWarnAge is when a rootfs's packages are old enough to say so:
// Debian's security archive moves faster than that.
const rootfsWarnAge = 7 * 24 * time.Hour

// rootfsAge warns about a rootfs whose packages are over rootfsWarnAge old
// and refuses one over maxAge (when set): security updates to the
// renderers reach a host only with a new build (make rootfs).
func rootfsAge(rep checkReport, man *rootfs.Manifest, maxAge time.Duration, now time.Time) error {
	age := man.Age(now)
	days := fmt.Sprintf("packages fetched %.1f days ago", age.Hours()/24)
	switch {
	case maxAge > 0 && age > maxAge:
		rep("FAIL", "rootfs age", fmt.Sprintf("%s, over -rootfs-max-age %s: rebuild it (make rootfs) and restart", days, maxAge), 16)
		return fmt.Errorf("refusing to start: rootfs age: %s, over -rootfs-max-age %s", days, maxAge)
	case age > rootfsWarnAge:
		rep("WARN", "rootfs age", days+": security updates since then are not in it (make rootfs)", 16)
	default:
		rep("PASS", "rootfs age", days, 16)
	}
	return nil
}

func printChecks(rep checkReport, checks []sandbox.Check) {
	for _, ch := range checks {
		verdict := "PASS"
		if !ch.Pass {
			verdict = "FAIL"
		}
		rep(verdict, ch.Name, ch.Detail, 26)
	}
}

func cmdCheck(ctx context.Context, args []string) error {
	c, _, err := parse("check", args, nil)
	if err != nil {
		return err
	}
	_, _, err = preflightAs(ctx, c, c.logger(), textReport(os.Stdout), true, false)
	if err == nil {
		fmt.Println("worker: ready")
	}
	return err
}

func cmdSelftest(ctx context.Context, args []string) error {
	c, _, err := parse("selftest", args, nil)
	if err != nil {
		return err
	}
	m, err := c.runnableManager(ctx)
	if err != nil {
		return err
	}
	m, _, cleanup, err := c.lockOrPrivate(m, false, c.logger())
	if err != nil {
		return err
	}
	defer cleanup()
	checks, err := m.SelfTest(ctx, true)
	if err != nil {
		return err
	}
	// What serve's start-up does not run (≈ 30 s of Chromium jobs): the
	// renderers' randomness is fresh in every job, restored ones included.
	fresh, err := render.SelfTestEntropy(ctx, m)
	if err != nil {
		return err
	}
	checks = append(checks, fresh...)
	printChecks(textReport(os.Stdout), checks)
	if f := sandbox.Failed(checks); len(f) > 0 {
		return fmt.Errorf("self-test: %d of %d isolation properties failed", len(f), len(checks))
	}
	fmt.Printf("self-test: all %d isolation properties hold\n", len(checks))
	return nil
}

func cmdReap(ctx context.Context, args []string) error {
	c, _, err := parse("reap", args, nil)
	if err != nil {
		return err
	}
	m, err := c.manager(c.logger())
	if err != nil {
		return err
	}
	n, err := m.Reap(ctx)
	fmt.Printf("reaped %d sandboxes\n", n)
	return err
}

// renderSummary is what `worker render` prints on stdout.
type renderSummary struct {
	Renderer  string            `json:"renderer"`
	Outcome   sandbox.Outcome   `json:"outcome"`
	Error     string            `json:"error,omitempty"`
	SandboxID string            `json:"sandbox_id"`
	Outputs   []string          `json:"outputs,omitempty"`
	Timings   map[string]string `json:"timings"`
}

func cmdRender(ctx context.Context, args []string) error {
	var name, outDir, options, limits, inputType string
	c, rest, err := parse("render", args, func(fs *flag.FlagSet) {
		fs.StringVar(&inputType, "input-type", "", "the input's media type when its bytes are text that could be several (text/html, text/markdown, text/csv, …)")
		fs.StringVar(&name, "renderer", "", "renderer name (see GET /v1/renderers), e.g. pdf-png, svg-png, html-pdf")
		fs.StringVar(&outDir, "o", "", "output directory")
		fs.StringVar(&options, "options", "", `renderer options as a JSON object, e.g. '{"dpi": 72}'`)
		fs.StringVar(&limits, "limits", "", `lower limits as a JSON object, e.g. '{"timeout_seconds": 10}'`)
	})
	if err != nil {
		return err
	}
	if name == "" || outDir == "" || len(rest) != 1 {
		return errors.New("render: usage: worker render -renderer NAME INPUT -o OUTDIR")
	}
	r, err := render.LookupWithDiagnostics(name)
	if err != nil {
		return err
	}
	input, err := os.ReadFile(rest[0])
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	plan, err := r.PrepareTyped(input, inputType, json.RawMessage(options), json.RawMessage(limits))
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	m, err := c.runnableManager(ctx)
	if err != nil {
		return err
	}
	plan.Job.Input = bytes.NewReader(input)
	res, runErr := m.Run(ctx, plan.Job)
	// A renderer of several stages (safe-pdf): each in a fresh sandbox,
	// the next built by the host from what the last returned.
	for i := 0; runErr == nil && i < len(plan.Stages())-1; i++ {
		next, err := plan.Next(i, res.Response.Files)
		if err != nil {
			runErr = &sandbox.Error{Outcome: sandbox.RenderFailed, Msg: err.Error()}
			break
		}
		res, runErr = m.Run(ctx, next.Job)
	}
	sum := renderSummary{Renderer: name, Outcome: sandbox.OutcomeOf(runErr), SandboxID: res.SandboxID,
		Timings: map[string]string{
			"create": res.Timings.Create.String(), "start": res.Timings.Start.String(),
			"render": res.Timings.Render.String(), "teardown": res.Timings.Teardown.String(),
		}}
	var outs []render.Output
	if runErr == nil {
		if outs, runErr = r.AcceptOutputs(res.Response.Files); runErr != nil {
			sum.Outcome = sandbox.RenderFailed
		}
	}
	if runErr == nil {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
		for _, o := range outs {
			p := filepath.Join(outDir, o.Name)
			if err := os.WriteFile(p, o.Data, 0o644); err != nil {
				return err
			}
			sum.Outputs = append(sum.Outputs, p)
		}
	} else {
		sum.Error = runErr.Error()
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(sum)
	if runErr != nil {
		return fmt.Errorf("render: %w", runErr)
	}
	return nil
}

func cmdRootfs(ctx context.Context, args []string) error {
	if len(args) < 1 {
		return errors.New("rootfs: usage: worker rootfs seal|image|verify|export|import [flags] ARG")
	}
	fs := flag.NewFlagSet("worker rootfs "+args[0], flag.ContinueOnError)
	pkgs := fs.String("packages", "", "seal: dpkg-query output (name<TAB>version per line)")
	inputs := fs.String("inputs", "", "seal: digest of the build inputs")
	packagesAt := fs.String("packages-at", "", "seal: when the packages were fetched (RFC 3339; default now)")
	outDir := fs.String("o", ".", "export: the directory the archive and its .sha256 are written to")
	sum := fs.String("sha256", "", "import: the archive's SHA-256 as export printed it (default: read from FILE.sha256)")
	dir := fs.String("dir", envOr("RENDERBOX_ROOTFS_DIR", "/var/lib/renderbox/rootfs"), "import: the rootfs directory, where current is switched (env RENDERBOX_ROOTFS_DIR)")
	var rest []string
	for rem := args[1:]; ; {
		if err := fs.Parse(rem); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		rest, rem = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
	if args[0] == "export" && len(rest) == 0 {
		rest = []string{envOr("RENDERBOX_ROOTFS", "/var/lib/renderbox/rootfs/current")}
	}
	if len(rest) != 1 {
		return fmt.Errorf("rootfs %s: give exactly one tree directory (or archive, to import)", args[0])
	}
	tree := rest[0]
	switch args[0] {
	case "seal":
		packages := map[string]string{}
		if *pkgs != "" {
			f, err := os.Open(*pkgs)
			if err != nil {
				return err
			}
			defer f.Close()
			if packages, err = rootfs.ParsePackages(f); err != nil {
				return err
			}
		}
		at := time.Now()
		if *packagesAt != "" {
			var err error
			if at, err = time.Parse(time.RFC3339, *packagesAt); err != nil {
				return fmt.Errorf("rootfs seal: -packages-at: %w", err)
			}
		}
		m, err := rootfs.Seal(tree, *inputs, packages, at)
		if err != nil {
			return err
		}
		fmt.Printf("sealed %s: %d files, %d MiB, tree %s\n", tree, m.Files, m.Bytes>>20, m.TreeSHA256)
	case "image":
		t := time.Now()
		m, err := rootfs.Verify(tree)
		if err != nil {
			return err
		}
		rec, err := rootfs.MakeImage(tree, m)
		if err != nil {
			return err
		}
		fmt.Printf("made %s: %d MiB in %.1fs, sha256 %s, its contents checked: tree %s\n", filepath.Join(tree, rootfs.ImageName), rec.Bytes>>20, time.Since(t).Seconds(), rec.SHA256, rec.TreeSHA256)
	case "fontconfig":
		if err := rootfs.FlattenFontconfig(tree); err != nil {
			return err
		}
		fmt.Printf("flattened the fontconfig configuration of %s; fontconfig answers as before (%s)\n", tree, rootfs.FontconfigRecordPath)
	case "verify":
		m, err := rootfs.Verify(tree)
		if err != nil {
			return err
		}
		fmt.Printf("%s matches its manifest: tree %s\n", tree, m.TreeSHA256)
	case "export":
		return rootfsExport(tree, *outDir)
	case "import":
		return rootfsImport(tree, *sum, *dir)
	default:
		return fmt.Errorf("rootfs: unknown subcommand %q (seal, fontconfig, image, verify, export or import)", args[0])
	}
	return nil
}

// rootfsExport packs tree into an archive in outDir (rootfs.Export).
func rootfsExport(tree, outDir string) error {
	t := time.Now()
	ex, err := rootfs.Export(tree, outDir)
	if err != nil {
		return err
	}
	fmt.Printf("exported %s: %d files, %d MiB in %d MiB, %.1fs\n", tree, ex.Manifest.Files, ex.Manifest.Bytes>>20, ex.Size>>20, time.Since(t).Seconds())
	fmt.Printf("tree    %s\narchive %s\nsha256  %s\n", ex.Manifest.TreeSHA256, ex.Path, ex.SHA256)
	return nil
}

// rootfsImport installs archive under dir, with its image, and switches
// its current to it (rootfs.Import), checking the archive against sum or
// its .sha256.
func rootfsImport(archive, sum, dir string) error {
	if sum == "" {
		var err error
		if sum, err = rootfs.ReadSHA256File(archive + ".sha256"); err != nil {
			return fmt.Errorf("rootfs import: %w (copy the .sha256 export wrote beside the archive, or give -sha256)", err)
		}
	}
	t := time.Now()
	im, err := rootfs.Import(archive, strings.ToLower(sum), dir)
	if err != nil {
		return err
	}
	how := "extracted and verified"
	if im.Reused {
		how = "already installed, verified"
	}
	fmt.Printf("imported %s: %s in %.1fs\ntree    %s\ncurrent %s (was %q); restart the worker to run it\n",
		archive, how, time.Since(t).Seconds(), im.Manifest.TreeSHA256, im.Tree, im.Previous)
	if im.Image == nil {
		fmt.Printf("no rootfs image: %v, then: worker rootfs image %s; until then sandboxes mount the tree through the gofer\n", rootfs.ErrNoMkfs, im.Tree)
		return nil
	}
	fmt.Printf("image   %s (%d MiB), its contents checked against the tree's manifest\n", filepath.Join(im.Tree, rootfs.ImageName), im.Image.Bytes>>20)
	return nil
}
