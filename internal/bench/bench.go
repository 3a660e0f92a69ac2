// Package bench measures, in one run, what the sandbox costs: a no-op
// job's sandbox lifecycle (create, start, exchange+wait, delete) against
// spawning the same agent natively, and pdf-png of a one-page PDF in the
// sandbox against the same agent and pdftoppm run natively in a chroot of
// the same rootfs. With a running API and worker (-api) it also measures
// jobs through the HTTP API: pdf-png against the direct sandbox run,
// intake, and the "served" lines — latency, throughput and CPU per job of
// html-pdf, office-pdf and pdf-png with the worker's pool off (cold) or on
// (warm). It prints JSON lines; the ratios are the figures that count.
//
// The native baseline runs the agent as uid 65534 in a private mount
// namespace (unshare) with a fresh tmpfs on the rootfs's /tmp, so it does
// exactly the sandboxed work minus gVisor.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/buildinfo"
	"github.com/renderbox/renderbox/internal/hostcheck"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/wire"
	"github.com/renderbox/renderbox/internal/worker"
)

// Main runs the bench command line args (without the program's name) and
// returns its exit status: 0, 1 for a failed run, 2 for a command line not
// understood. name heads the flags' usage, as flag.CommandLine's would.
func Main(name string, args []string) int {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	n := fs.Int("n", 20, "iterations per measurement")
	heavyN := fs.Int("heavy-n", 3, "iterations for Chromium and LibreOffice renderers")
	apiURL := fs.String("api", "", "with a running API and worker (make bench starts them): also measure end to end and intake")
	key := fs.String("key", os.Getenv("RENDERBOX_KEY"), "API key for -api")
	intake := fs.Int("intake", 2000, "jobs submitted for the intake measurement (enough that the first burst does not dominate; 0 skips it)")
	only := fs.String("only", "", "run only this part: lifecycle, renderers, served, url, api (end to end and intake) or intake")
	renderers := fs.String("renderers", "", "renderers part: only these renderers (comma-separated; default all)")
	mode := fs.String("mode", modeCold, "served lines' mode: cold (the worker's pool is off), warm (on; waits for it to fill) or native-warm (on, the worker started with -unsafe-native-bench)")
	storage := fs.String("storage", storageRedis, "served lines' storage, as the stack runs: redis (the default -blobs) or s3 (API and worker with -blobs s3://…)")
	servedRenderers := fs.String("served-renderers", servedRenderers, "renderers measured through the API (comma-separated)")
	servedSerial := fs.Int("served-serial", 10, "served: jobs one after another for p50/p99")
	servedJobs := fs.Int("served-jobs", 24, "served: jobs for throughput and CPU per job")
	servedConc := fs.Int("served-concurrency", 4, "served: clients at once in the throughput phase")
	workerMetrics := fs.String("worker-metrics", "", "the worker's /metrics URL, to see its pool (renderbox_pool_idle)")
	poolWait := fs.Duration("pool-wait", 2*time.Minute, "warm: longest wait for the pool to refill before a phase")
	urlOrigin := fs.String("url-origin", "127.0.0.3:0", "url: where the page is served; the worker's -remote-allow must admit it (the line is skipped with -url-origin \"\")")
	coldFile := fs.String("cold", "", "JSON lines holding this run's earlier served lines (cold, warm); prints the summary: warm over cold and over native-warm, and warm with s3 over warm with redis")
	tree := fs.String("rootfs", envOr("RENDERBOX_ROOTFS", "/var/lib/renderbox/rootfs/current"), "built rootfs tree")
	runsc := fs.String("runsc", os.Getenv("RENDERBOX_RUNSC"), "runsc binary")
	version := fs.Bool("version", false, "print the build (version, VCS revision, Go release) and exit")
	_ = fs.Parse(args) // ExitOnError: exits 2 itself, or 0 for -h
	if *version {
		buildinfo.Read().Print(os.Stdout, "bench")
		return 0
	}
	// bench has no commands: a word on its command line is a mistake
	// (perhaps "bench version"), refused before anything is measured.
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: takes only flags, got %q\n\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	served := servedOpts{
		mode: *mode, renderers: strings.Split(*servedRenderers, ","), serial: max(1, *servedSerial), jobs: max(1, *servedJobs),
		concurrency: max(1, *servedConc), metrics: *workerMetrics, poolWait: *poolWait, coldFile: *coldFile,
		storage: *storage,
	}
	if err := run(context.Background(), opts{n: *n, heavyN: *heavyN, tree: *tree, runsc: *runsc, api: *apiURL, key: *key, intake: *intake, only: *only, renderers: *renderers, served: served, urlOrigin: *urlOrigin}); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

type opts struct {
	n, heavyN, intake int
	tree, runsc       string
	api, key, only    string
	// renderers, when set, is the comma-separated renderers the
	// renderers part measures.
	renderers string
	served    servedOpts
	// urlOrigin is where the url line's page is served; "" skips it.
	urlOrigin string
}

func run(ctx context.Context, o opts) error {
	n, heavyN, tree, runsc := o.n, o.heavyN, o.tree, o.runsc
	state := fmt.Sprintf("/run/renderbox-bench-%d", os.Getpid())
	defer func() { _ = sandbox.RemoveStateDir(state) }()
	// The root the worker mounts: the tree's EROFS image, verified as the
	// worker's start-up checks verify it, or the tree through the gofer
	// when it has none. The direct lines used to take the gofer always,
	// a root the worker only runs with -no-rootfs-image.
	mf, err := rootfs.ReadManifest(tree)
	if err != nil {
		return err
	}
	image, _, err := rootfs.VerifyImage(tree, mf)
	if err != nil {
		return err
	}
	m, err := sandbox.NewManager(sandbox.Config{
		Runsc: runsc, Rootfs: rootfs.Dir(tree), RootfsImage: image, StateDir: state,
		CgroupParent: fmt.Sprintf("renderbox-bench-%d", os.Getpid()),
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	// The worker's own cheap checks: a bench on a host that would refuse
	// to serve measures nothing worth keeping.
	if err := hostcheck.Runtime(ctx, m); err != nil {
		return err
	}
	defer func() {
		for _, d := range sandbox.ParentCgroupDirs(m.Config().CgroupParent) {
			os.Remove(d)
		}
	}()
	out := json.NewEncoder(os.Stdout)
	stamp := time.Now().UTC().Format(time.RFC3339)
	// First, what this host charges for the kernel transitions every
	// sandboxed line is made of.
	host, err := measureHost()
	if err != nil {
		return err
	}
	if err := out.Encode(map[string]any{"time": stamp, "bench": "host", "cores": host.Cores,
		"syscall_ns": host.SyscallNs, "thread_round_trip_us": host.SwitchUs, "rootfs_image": image != ""}); err != nil {
		return err
	}

	if o.only == "" || o.only == "lifecycle" {
		if err := benchLifecycle(ctx, out, stamp, m, tree, n); err != nil {
			return err
		}
	}
	if o.only == "" || o.only == "renderers" {
		for _, c := range benchCases() {
			if o.renderers != "" && !slices.Contains(strings.Split(o.renderers, ","), c.renderer) {
				continue
			}
			iters := n
			if c.heavy {
				iters = max(1, heavyN)
			}
			if err := benchRenderer(ctx, out, stamp, m, rootfs.Dir(tree), c, iters); err != nil {
				return err
			}
		}
	}
	// Failed served jobs fail the run, after the other parts.
	var servedErr error
	if o.api != "" && (o.only == "" || o.only == "served") {
		lines, err := benchServed(ctx, out, stamp, newAPIClient(o.api, o.key), o.served)
		if err != nil {
			return err
		}
		if o.served.coldFile != "" {
			if err := summarize(out, stamp, o.served.coldFile, lines); err != nil {
				return err
			}
		}
		for _, l := range lines {
			if l.Failed > 0 && servedErr == nil {
				servedErr = fmt.Errorf("served: %d %s job(s) failed in %s mode (see its line, and the worker's log)", l.Failed, l.Renderer, l.Mode)
			}
		}
	}
	if o.api != "" && o.urlOrigin != "" && (o.only == "" || o.only == "url") {
		if err := benchURL(ctx, out, stamp, newAPIClient(o.api, o.key), o.urlOrigin, o.served.serial); err != nil {
			return err
		}
	}
	if o.api != "" && (o.only == "" || o.only == "api") {
		if err := benchEndToEnd(ctx, out, stamp, m, o.api, o.key, o.served.metrics, n); err != nil {
			return err
		}
	}
	if o.api != "" && o.intake > 0 && (o.only == "" || o.only == "api" || o.only == "intake") {
		if err := benchIntake(ctx, out, stamp, o.api, o.key, o.intake); err != nil {
			return err
		}
	}
	return servedErr
}

// benchLifecycle times a no-op job's sandbox phases against the same agent
// spawned natively.
func benchLifecycle(ctx context.Context, out *json.Encoder, stamp string, m *sandbox.Manager, tree string, n int) error {
	// 1. No-op lifecycle.
	noop := wire.Request{Mode: wire.ModeRender, Argv: []string{"/bin/true"}, InputName: "input"}
	var create, start, exch, destroy, total []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		sb, err := m.Prepare(ctx, sandbox.Limits{})
		if err != nil {
			return err
		}
		t1 := time.Now()
		if err := sb.Start(ctx); err != nil {
			sb.Destroy(ctx)
			return err
		}
		t2 := time.Now()
		if _, err := sb.Exchange(&noop, nil, nil); err != nil {
			sb.Destroy(ctx)
			return err
		}
		if _, err := sb.Wait(ctx); err != nil && !errors.Is(err, sandbox.ErrGone) {
			sb.Destroy(ctx)
			return err
		}
		t3 := time.Now()
		if err := sb.Destroy(ctx); err != nil {
			return err
		}
		t4 := time.Now()
		create, start, exch, destroy = append(create, t1.Sub(t0)), append(start, t2.Sub(t1)), append(exch, t3.Sub(t2)), append(destroy, t4.Sub(t3))
		total = append(total, t4.Sub(t0))
	}
	var native []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := runNative(ctx, rootfs.Dir(tree), &noop, nil); err != nil {
			return err
		}
		native = append(native, time.Since(t0))
	}
	return out.Encode(map[string]any{
		"time": stamp, "bench": "noop_lifecycle", "n": n,
		"sandbox_create_ms": stats(create), "sandbox_start_ms": stats(start),
		"sandbox_exchange_wait_ms": stats(exch), "sandbox_delete_ms": stats(destroy),
		"sandbox_total_ms": stats(total), "native_total_ms": stats(native),
		"ratio_p50": ratio(pct(total, 50), pct(native, 50)), "ratio_p99": ratio(pct(total, 99), pct(native, 99)),
	})
}

type benchCase struct {
	renderer, input string
	data            []byte
	heavy           bool // Chromium or LibreOffice: fewer iterations
}

// benchOptions are the options a renderer cannot go without.
var benchOptions = map[string]map[string]any{"pdf-watermark": {"text": "DRAFT"}, "pdf-stamp": {"text": "PAID"}}

func benchCases() []benchCase {
	return []benchCase{
		{"pdf-png", "one-page PDF, 150 dpi", samples.PDF("renderbox benchmark", 1), false},
		{"svg-png", "320x200 SVG", samples.SVG(320, 200, 40, 40, 80), false},
		{"svg-pdf", "320x200 SVG", samples.SVG(320, 200, 40, 40, 80), false},
		{"dot-svg", "3-node graph", samples.DOT("intake", "sandbox", "outputs"), false},
		{"dot-png", "3-node graph", samples.DOT("intake", "sandbox", "outputs"), false},
		{"markdown-html", "small document with a table", samples.Markdown("benchmark"), false},
		{"image-thumbnail", "800x400 PNG to 256x256", pngOf(samples.Image(800, 400, 0, 0, 400)), false},
		{"html-pdf", "one-page HTML", samples.HTML("benchmark", "One page of text."), true},
		{"html-png", "one-page HTML, 1280x800", samples.HTML("benchmark", "One page of text."), true},
		{"markdown-pdf", "small document with a table", samples.Markdown("benchmark"), true},
		{"office-pdf", "two-paragraph DOCX", samples.DOCX("benchmark", "Two paragraphs."), true},
		{"pdf-merge", "one 5-page PDF", samples.PDF("benchmark", 5), false},
		{"pdf-split", "5-page PDF, a part per page", samples.PDF("benchmark", 5), false},
		{"pdf-pages", "5-page PDF, all pages", samples.PDF("benchmark", 5), false},
		{"pdf-metadata", "5-page PDF, read", samples.PDF("benchmark", 5), false},
		{"pdf-flatten", "one-page form: 2 fields and a note", samples.FormPDF("Ada Lovelace", "London", "Reviewed"), false},
		{"pdf-watermark", "5-page PDF, a text under every page", samples.PDF("benchmark", 5), false},
		{"pdf-stamp", "5-page PDF, a text over every page", samples.PDF("benchmark", 5), false},
		{"pdf-archive", "5-page PDF to PDF/A-2b", samples.PDF("benchmark", 5), false},
		{"pdf-optimize", "5-page PDF, images at 150 dpi", samples.PDF("benchmark", 5), false},
		{"pdf-bookmarks", "5-page PDF, read", samples.PDF("benchmark", 5), false},
		{"pdf-attach", "5-page PDF and an XML file to embed", samples.AttachJob(5), false},
		{"factur-x", "one-page invoice PDF and its XML", samples.FacturXJob(1), false},
	}
}

func pngOf(img image.Image) []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

func benchRenderer(ctx context.Context, out *json.Encoder, stamp string, m *sandbox.Manager, root string, c benchCase, n int) error {
	r, err := render.Lookup(c.renderer)
	if err != nil {
		return err
	}
	plan, err := r.Prepare(c.data, benchOptions[c.renderer], render.LimitRequest{})
	if err != nil {
		return err
	}
	var sbx, nat []time.Duration
	for i := 0; i < n; i++ {
		plan.Job.Input = bytes.NewReader(c.data)
		t0 := time.Now()
		if _, err := runPlan(ctx, m, r, plan, c.data); err != nil {
			return fmt.Errorf("%s in the sandbox: %w", c.renderer, err)
		}
		sbx = append(sbx, time.Since(t0))
	}
	for i := 0; i < n; i++ {
		req := plan.Job.Request
		req.MaxOutputBytes, req.MaxOutputFiles = 64<<20, 1000
		t0 := time.Now()
		resp, err := runNative(ctx, root, &req, c.data)
		if err != nil {
			return fmt.Errorf("%s natively: %w", c.renderer, err)
		}
		if rr := resp.Result; rr.ExitCode != 0 || rr.Error != "" || len(resp.Files) == 0 {
			return fmt.Errorf("%s natively: exit %d, %d files, %s: %s", c.renderer, rr.ExitCode, len(resp.Files), rr.Error, rr.StderrTail)
		}
		nat = append(nat, time.Since(t0))
	}
	return out.Encode(map[string]any{
		"time": stamp, "bench": "renderer", "renderer": c.renderer, "n": n, "input": c.input,
		"sandbox_total_ms": stats(sbx), "native_total_ms": stats(nat),
		"ratio_p50": ratio(pct(sbx, 50), pct(nat, 50)), "ratio_p99": ratio(pct(sbx, 99), pct(nat, 99)),
	})
}

// nativeScript runs the agent as it runs in the sandbox but without gVisor:
// a private mount namespace, a fresh tmpfs /tmp, /proc, the /dev nodes
// gVisor also provides (Chromium spins without /dev/urandom), chroot
// into the same rootfs, uid 65534. It only ever gets the fixed rootfs path.
const nativeScript = `set -e
r=$1
mount -t tmpfs -o size=256m,nosuid,nodev,mode=1777 tmpfs "$r/tmp"
mount -t proc proc "$r/proc"
mount -t tmpfs -o size=64k tmpfs "$r/dev"
for d in null zero random urandom; do touch "$r/dev/$d" && mount --bind "/dev/$d" "$r/dev/$d"; done
exec chroot --userspec=65534:65534 "$r" /usr/local/bin/renderbox-agent`

func runNative(ctx context.Context, root string, req *wire.Request, input []byte) (*wire.Response, error) {
	r := *req
	r.InputSize = int64(len(input))
	var in bytes.Buffer
	if err := wire.WriteRequest(&in, &r, bytes.NewReader(input)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", nativeScript, "sh", root)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	resp, rerr := wire.ReadResponse(stdout, wire.Limits{MaxBytes: 64 << 20, MaxFiles: 100})
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("native agent: %w: %s", err, stderr.String())
	}
	return resp, rerr
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

func stats(ds []time.Duration) map[string]float64 {
	return map[string]float64{"p50": ms(pct(ds, 50)), "p99": ms(pct(ds, 99))}
}

func ratio(a, b time.Duration) float64 {
	return math.Round(float64(a)/float64(b)*100) / 100
}

// runPlan runs plan as a worker runs a job (worker.Runner), its outputs
// checked, and waits for its sandbox's teardown. It returns how long the
// job took to its result, as a worker reports it: without the teardown.
func runPlan(ctx context.Context, m *sandbox.Manager, r *render.Renderer, plan *render.Plan, input []byte) (time.Duration, error) {
	log := slog.New(slog.DiscardHandler)
	t0 := time.Now()
	ran := (&worker.Runner{Manager: m, Logger: log}).Run(ctx, log, r, plan, input)
	d := time.Since(t0)
	ran.Teardown()
	return d, ran.Err
}
