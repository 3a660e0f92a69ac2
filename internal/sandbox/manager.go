package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// Config configures a Manager.
type Config struct {
	// Runsc is the runsc binary; "" means locate it ($PATH, then
	// /usr/local/bin/runsc).
	Runsc string
	// Platform is runsc's --platform. Default "systrap" (kvm hangs under
	// nested virtualisation).
	Platform string
	// SystrapFastPath keeps runsc's adaptive systrap fast path; off by
	// default (Runsc.SystrapFastPath says why, docs/pool.md "Systrap's fast
	// path is off" the figures).
	SystrapFastPath bool
	// StateDir holds runsc's --root and the per-job bundles. It must be
	// private to this manager: Reap deletes everything in it. Default
	// /run/renderbox.
	StateDir string
	// Rootfs is the renderer root filesystem (the rootfs/ directory of a
	// built tree). Required.
	Rootfs string
	// RootfsImage, if set, is an EROFS image of Rootfs (rootfs.MakeImage)
	// that the Sentry mounts as the root: it reads the files from the
	// image, handed to it read-only, instead of asking the gofer for each.
	// Light jobs run 15–35% faster (docs/operations.md, "The rootfs image"). The
	// caller verifies it (rootfs.VerifyImage) before any sandbox runs.
	RootfsImage string
	// CgroupParent is the cgroup under which each sandbox gets its own, as
	// <CgroupParent>/<sandbox id>. Private to this manager, like StateDir.
	// Default "renderbox".
	CgroupParent string
	// Limits are the defaults for jobs that do not set their own.
	Limits Limits
	// Logger receives lifecycle logs. Default: discard.
	Logger *slog.Logger
	// RunscDebugLog, if set, is a directory for runsc's debug logs.
	RunscDebugLog string
}

func (c Config) withDefaults() Config {
	if c.Platform == "" {
		c.Platform = "systrap"
	}
	if c.StateDir == "" {
		c.StateDir = "/run/renderbox"
	}
	if c.CgroupParent == "" {
		c.CgroupParent = "renderbox"
	}
	c.Limits = c.Limits.WithDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Rootfs == "" {
		return errors.New("sandbox config: Rootfs is required (build it with: make rootfs)")
	}
	if st, err := os.Stat(filepath.Join(c.Rootfs, strings.TrimPrefix(AgentPath, "/"))); err != nil || st.IsDir() {
		return fmt.Errorf("sandbox config: no agent at %s in rootfs %s (build it with: make rootfs)", AgentPath, c.Rootfs)
	}
	if !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("sandbox config: StateDir %q must be absolute", c.StateDir)
	}
	if strings.Contains(c.CgroupParent, "..") || strings.HasPrefix(c.CgroupParent, "/") {
		return fmt.Errorf("sandbox config: CgroupParent %q must be a relative name", c.CgroupParent)
	}
	return nil
}

// Manager runs jobs in fresh sandboxes.
type Manager struct {
	cfg   Config
	runsc *Runsc
	log   *slog.Logger

	lockMu   sync.Mutex
	lockFile *os.File // the state dir's lock, while held (Lock)

	renders Gate // jobs rendering now, which the pool's fills wait for

	// noSwap: the kernel accounts swap to cgroups, and every sandbox's
	// memory+swap is capped at its memory limit (SpecOptions.NoSwap).
	noSwap bool

	// native: sandboxes are native processes without gVisor, the unsafe
	// benchmark floor (UseUnsafeNative, native.go).
	native bool
}

// NewManager locates runsc and prepares the state directory. It does not
// check versions or run the self-test; see Preflight.
func NewManager(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	path, err := Locate(cfg.Runsc)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(cfg.StateDir, "runsc")
	for _, d := range []string{cfg.StateDir, root, filepath.Join(cfg.StateDir, "bundles")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating state dir: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("securing state dir: %w", err)
		}
	}
	// Resolved: the gofer refuses mounts under a path that goes through a
	// symlink, and a link moved later must not change the tree in use.
	rootfs, err := filepath.EvalSymlinks(cfg.Rootfs)
	if err == nil {
		rootfs, err = filepath.Abs(rootfs)
	}
	if err != nil {
		return nil, err
	}
	cfg.Rootfs = rootfs
	return &Manager{
		cfg:    cfg,
		runsc:  &Runsc{Path: path, Root: root, Platform: cfg.Platform, SystrapFastPath: cfg.SystrapFastPath, LogDir: cfg.RunscDebugLog},
		log:    cfg.Logger,
		noSwap: SwapAccounting(),
	}, nil
}

// Runsc returns the runsc wrapper the manager uses.
func (m *Manager) Runsc() *Runsc { return m.runsc }

// Config returns the manager's effective configuration.
func (m *Manager) Config() Config { return m.cfg }

// Logger returns the logger the manager's lifecycle logs go to.
func (m *Manager) Logger() *slog.Logger { return m.log }

// Gate returns the gate every job's render passes, from its request (or
// its take from the pool) to its answer.
func (m *Manager) Gate() *Gate { return &m.renders }

// rendering counts a job's render at the gate; call the result when it
// ends.
func (m *Manager) rendering() func() { return m.renders.Enter() }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "rbx-" + hex.EncodeToString(b[:])
}

// Prepare builds a fresh bundle and creates a sandbox with limits, without
// starting it. A pool can call it ahead of jobs; Run calls it for each job
// that brings no sandbox. The caller owns the sandbox and must Destroy it.
func (m *Manager) Prepare(ctx context.Context, limits Limits) (*Sandbox, error) {
	return m.prepare(ctx, limits, []string{AgentPath})
}

// BootCPUs is the CPU quota a sandbox with a lower limit is made with
// (SpecOptions.BootCPUs): enough for runsc, the gofer and the Sentry to
// boot without being throttled, and no more CPUs than the Sentry shows
// its applications for a quota of 1 (runsc's own floor is 2).
const BootCPUs = 2

// NewSandbox writes a fresh bundle whose process is args and returns its
// sandbox, not yet made: the caller Creates it (and Starts it) or Restores
// a checkpoint into it, and must Destroy it whatever happens.
func (m *Manager) NewSandbox(limits Limits, args []string) (*Sandbox, error) {
	lim := limits.WithDefaults()
	id := newID()
	s := &Sandbox{
		ID:     id,
		Limits: lim,
		runsc:  m.runsc,
		bundle: filepath.Join(m.cfg.StateDir, "bundles", id),
		cgroup: "/" + m.cfg.CgroupParent + "/" + id,
		noSwap: m.noSwap,
	}
	if m.native {
		s.native = m.cfg.Rootfs
	}
	// A native sandbox's cgroup is written by nativeCreate, at lim.
	boot := 0.0
	if !m.native && lim.CPUs < BootCPUs {
		boot, s.cpuPending = BootCPUs, true
	}
	err := writeBundle(s.bundle, SpecOptions{
		RootfsPath:  m.cfg.Rootfs,
		RootfsImage: m.cfg.RootfsImage,
		Args:        args,
		UID:         AgentUID,
		GID:         AgentGID,
		CgroupsPath: s.cgroup,
		Limits:      lim,
		NoSwap:      m.noSwap,
		BootCPUs:    boot,
	})
	if err != nil {
		derr := s.Destroy(context.Background())
		return nil, errors.Join(fmt.Errorf("creating sandbox %s: %w", id, err), derr)
	}
	return s, nil
}

// prepare writes a bundle whose process is args and creates the sandbox
// from it.
func (m *Manager) prepare(ctx context.Context, limits Limits, args []string) (*Sandbox, error) {
	s, err := m.NewSandbox(limits, args)
	if err != nil {
		return nil, err
	}
	if err := s.Create(ctx); err != nil {
		derr := s.Destroy(context.WithoutCancel(ctx))
		return nil, errors.Join(fmt.Errorf("creating sandbox %s: %w", s.ID, err), derr)
	}
	return s, nil
}

// Job is one request to run in a sandbox.
type Job = jobspec.Job

// Timings are the phases of one sandboxed job.
type Timings struct {
	Create   time.Duration // bundle + runsc create
	Start    time.Duration // runsc start
	Render   time.Duration // request sent → response read
	Teardown time.Duration // kill + delete + cleanup
}

// Result is a job that ran to a response. Outcome is Succeeded unless Run
// also returned an error.
type Result struct {
	SandboxID string
	Response  *wire.Response
	// ExitStatus is the agent's exit status when it ended without
	// answering; -1 when it answered (its sandbox is not waited for) or
	// its status could not be read.
	ExitStatus int
	Timings    Timings
}

// errTimeout is the cause of a job context that hit its deadline.
var errTimeout = errors.New("job deadline exceeded")

// waitGrace is how long an agent that did not answer may take to exit,
// for its status.
const waitGrace = 2 * time.Second

// Run runs job in a fresh sandbox and destroys the sandbox before
// returning. A non-nil error is an *Error whose Outcome classifies the
// failure; the Result is returned either way, for its timings.
func (m *Manager) Run(ctx context.Context, job Job) (*Result, error) {
	res, td, err := m.Exec(ctx, nil, job)
	td.Wait()
	return res, err
}

// RunIn runs job in a sandbox from Prepare (for instance from a pool) and
// destroys it before returning. The sandbox's limits apply, not job.Limits.
func (m *Manager) RunIn(ctx context.Context, sb *Sandbox, job Job) (*Result, error) {
	res, td, err := m.Exec(ctx, sb, job)
	td.Wait()
	return res, err
}

// teardownTimeout bounds the destruction of a sandbox after its job.
const teardownTimeout = 30 * time.Second

// Teardown is a sandbox being destroyed after its job.
type Teardown struct {
	res  *Result
	done chan struct{}
	took time.Duration
}

// Wait blocks until the sandbox is gone (at most teardownTimeout after its
// job ended) and sets the result's Timings.Teardown. A nil Teardown, of a
// sandbox never created, has nothing to wait for.
func (t *Teardown) Wait() {
	if t == nil {
		return
	}
	<-t.done
	t.res.Timings.Teardown = t.took
}

// Exec runs job in sb (a fresh sandbox when sb is nil) and returns its
// result as soon as there is one, while the sandbox is being destroyed:
// whatever the caller does with the result (checking, storing, reporting
// it) does not wait for the teardown, nor the teardown for it. The caller
// must Wait for the Teardown before it lets go of the job. A non-nil error
// is an *Error whose Outcome classifies the failure; the Result is
// returned either way, for its timings.
func (m *Manager) Exec(ctx context.Context, sb *Sandbox, job Job) (*Result, *Teardown, error) {
	res := &Result{ExitStatus: -1}
	if sb == nil {
		lim := job.Limits
		if lim == (Limits{}) {
			lim = m.cfg.Limits
		}
		t0 := time.Now()
		var err error
		sb, err = m.Prepare(ctx, lim)
		res.Timings.Create = time.Since(t0)
		if err != nil {
			return res, nil, setupFailure(ctx, err, "the job ended before its sandbox was created", "creating the sandbox")
		}
	}
	res.SandboxID = sb.ID
	log := m.log.With("sandbox_id", sb.ID)
	err := m.runIn(ctx, sb, job, res)
	if err != nil {
		log.Info("sandbox job failed", "outcome", OutcomeOf(err), "err", err)
	}
	td := &Teardown{res: res, done: make(chan struct{})}
	go func() {
		defer close(td.done)
		t := time.Now()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if derr := sb.Destroy(cctx); derr != nil {
			log.Error("destroying sandbox", "err", derr)
		}
		td.took = time.Since(t)
	}()
	return res, td, err
}

// ctxOutcome tells a canceled job from a timed-out one by the context's
// cause; "" while the context is alive.
func ctxOutcome(ctx context.Context) Outcome {
	if ctx.Err() == nil {
		return ""
	}
	if errors.Is(context.Cause(ctx), errTimeout) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Timeout
	}
	return Canceled
}

// setupFailure classifies a sandbox that could not be created or started:
// the job's own end if its context ended, else the sandbox's failure.
func setupFailure(ctx context.Context, err error, ended, doing string) *Error {
	if o := ctxOutcome(ctx); o != "" {
		return fail(o, err, "%s", ended)
	}
	return fail(SandboxFailure, err, "%s", doing)
}

// runIn sends job to sb and waits for its response, the job's deadline or
// its cancel, whichever comes first; classify says what that ending means.
func (m *Manager) runIn(ctx context.Context, sb *Sandbox, job Job, res *Result) error {
	lim := sb.Limits
	ctx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errTimeout)
	defer cancel()

	req := job.Request
	if b := req.Browser; b != nil && b.URL != "" && job.Broker == nil {
		// Without a broker the page's first request would end the job
		// as a broken sandbox; this is the host's setting, said so.
		return &Error{Outcome: RenderFailed, Msg: "a page by URL needs the host's broker, which this host does not run (-remote-content)"}
	}
	// The agent is told the limits so an honest one can say output_limit
	// itself; the host enforces lim whatever the agent does.
	if req.MaxOutputBytes == 0 {
		req.MaxOutputBytes = lim.MaxOutputBytes
	}
	if req.MaxOutputFiles == 0 {
		req.MaxOutputFiles = lim.MaxOutputFiles
	}
	if req.StderrTail == 0 {
		req.StderrTail = 4096
	}
	if req.MaxTasks == 0 && sb.native == "" {
		// A pooled sandbox was created with its family's RLIMIT_NPROC;
		// the agent starts this job's renderer under the job's. (A
		// native one has none: nativeCommand says why.)
		req.MaxTasks = lim.NProc
	}
	input := job.Input
	if input == nil {
		input = strings.NewReader("")
	}

	t := time.Now()
	// A pooled sandbox was started (or restored) before the job.
	if sb.State() == StateCreated {
		if err := sb.Start(ctx); err != nil {
			return setupFailure(ctx, err, "the job ended while its sandbox started", "starting the sandbox")
		}
	}
	res.Timings.Start = time.Since(t)

	t = time.Now()
	// The pool's fills give way while this runs (gate.go); for a
	// sandbox from the pool, since the job took it.
	if sb.rendered == nil {
		sb.rendered = m.rendering()
	}
	rendered := sb.rendered
	defer rendered()
	e := m.exchange(ctx, sb, &req, input, job.Spool, job.Broker, func() {
		rendered()
		res.Timings.Render = time.Since(t)
	})
	if e.exited {
		res.ExitStatus = e.exitStatus
	}
	if e.exchErr == nil {
		res.Response = e.resp
	}
	return classify(e)
}

// exchange sends req to sb and reads its response, calling answered as
// soon as it has one or the job ended; it kills the sandbox when the job
// ends first, when the sandbox sends too much, and when its agent, without
// answering, does not exit within waitGrace. What it saw is classify's to
// judge.
func (m *Manager) exchange(ctx context.Context, sb *Sandbox, req *wire.Request, input io.Reader, spool wire.Spool, broker wire.Broker, answered func()) ending {
	lim := sb.Limits
	type exchanged struct {
		resp *wire.Response
		err  error
	}
	exch := make(chan exchanged, 1)
	go func() {
		r, err := sb.ExchangeWith(req, input, spool, broker)
		exch <- exchanged{r, err}
	}()
	type ended struct {
		code int
		err  error
	}
	waited := make(chan ended, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), lim.Timeout+time.Minute)
		defer wcancel()
		code, err := sb.Wait(wctx)
		waited <- ended{code, err}
	}()
	kill := func() {
		// On a context that survives the job's.
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer kcancel()
		_ = sb.Kill(kctx)
	}

	e := ending{limits: lim}
	var ex exchanged
	select {
	case <-ctx.Done():
		answered()
		kill()
		e.ended, e.cause = ctxOutcome(ctx), context.Cause(ctx)
		return e
	case ex = <-exch:
	}
	answered()
	e.resp, e.exchErr = ex.resp, ex.err
	if errors.Is(ex.err, wire.ErrOutputLimit) {
		kill()
		return e
	}
	// An agent that answered has nothing more to say: the sandbox is
	// destroyed without waiting for it to exit (docs/design.md, "A job's
	// path"). One that did not answer is given a moment to exit, for its
	// status.
	if ex.err != nil {
		select {
		case w := <-waited:
			if e.exited = w.err == nil; e.exited {
				e.exitStatus = w.code
			} else {
				e.exchErr = fmt.Errorf("%w; %w", ex.err, w.err)
			}
		case <-time.After(waitGrace):
			kill()
		}
		e.stderr = sb.Stderr()
	}
	e.counters = sb.counters()
	return e
}

// headOf is s cut to at most n bytes, on a rune boundary, marked "…" when
// cut.
func headOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

func tailOf(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// RemoveStateDir removes a state dir no manager uses any more. runsc
// bind-mounts an empty network namespace (--network=none) into its root,
// which RemoveAll cannot remove: it is unmounted first, or every private
// state dir (a check beside a live worker, a test) would leave one mount.
func RemoveStateDir(dir string) error {
	_ = syscall.Unmount(filepath.Join(dir, "runsc", "null-netns"), syscall.MNT_DETACH)
	return os.RemoveAll(dir)
}
