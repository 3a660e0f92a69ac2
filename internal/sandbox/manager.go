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

	"github.com/renderbox/renderbox/internal/bytesize"
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

	renders renderGate // jobs rendering now (quiet.go)

	// noSwap: the kernel accounts swap to cgroups, and every sandbox's
	// memory+swap is capped at its memory limit (SpecOptions.NoSwap).
	noSwap bool
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

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "rbx-" + hex.EncodeToString(b[:])
}

// Prepare builds a fresh bundle and creates a sandbox with limits, without
// starting it. A pool can call it ahead of jobs; Run calls it for each job
// that brings no sandbox. The caller owns the sandbox and must Destroy it.
func (m *Manager) Prepare(ctx context.Context, limits Limits) (*Sandbox, error) {
	return m.prepare(ctx, limits, []string{AgentPath}, true)
}

// prepare writes a bundle whose process is args and, if create, creates the
// sandbox from it (a restore creates it itself).
func (m *Manager) prepare(ctx context.Context, limits Limits, args []string, create bool) (*Sandbox, error) {
	lim := limits.WithDefaults()
	id := newID()
	s := &Sandbox{
		ID:     id,
		Limits: lim,
		runsc:  m.runsc,
		bundle: filepath.Join(m.cfg.StateDir, "bundles", id),
		cgroup: "/" + m.cfg.CgroupParent + "/" + id,
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
	})
	if err == nil && create {
		err = s.create(ctx)
	}
	if err != nil {
		derr := s.Destroy(context.WithoutCancel(ctx))
		return nil, errors.Join(fmt.Errorf("creating sandbox %s: %w", id, err), derr)
	}
	return s, nil
}

// Job is one request to run in a sandbox.
type Job struct {
	Request wire.Request
	Input   io.Reader
	// Spool, if set, takes the response's files as they arrive: the
	// Result's Response then lists them without their bytes.
	Spool wire.Spool
	// Limits for this job; zero fields take the manager's defaults.
	Limits Limits
}

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

// waitGrace is how long the agent may take to exit after answering.
const waitGrace = 2 * time.Second

// Run runs job in a fresh sandbox and destroys the sandbox before
// returning. A non-nil error is an *Error whose Outcome classifies the
// failure; the Result is returned either way, for its timings.
func (m *Manager) Run(ctx context.Context, job Job) (*Result, error) {
	return m.RunThen(ctx, nil, job, nil)
}

// RunIn runs job in a sandbox from Prepare (for instance from a pool) and
// destroys it before returning. The sandbox's limits apply, not job.Limits.
func (m *Manager) RunIn(ctx context.Context, sb *Sandbox, job Job) (*Result, error) {
	return m.RunThen(ctx, sb, job, nil)
}

// RunThen runs job in sb (a fresh sandbox when sb is nil) and calls then,
// if set, with the result while the sandbox is being destroyed: whatever
// then does (storing outputs, reporting the result) does not wait for the
// teardown, nor the teardown for it; both end before RunThen returns. The
// result's Timings.Teardown is not set yet when then runs.
func (m *Manager) RunThen(ctx context.Context, sb *Sandbox, job Job, then func(*Result, error)) (*Result, error) {
	res := &Result{ExitStatus: -1}
	if sb == nil {
		lim := job.Limits
		if lim == (Limits{}) {
			lim = m.cfg.Limits
		}
		t0 := time.Now()
		var err error
		sb, err = m.Prepare(ctx, lim.WithDefaults())
		res.Timings.Create = time.Since(t0)
		if err != nil {
			if o := ctxOutcome(ctx); o != "" {
				err = fail(o, err, "the job ended before its sandbox was created")
			} else {
				err = fail(SandboxFailure, err, "creating the sandbox")
			}
			if then != nil {
				then(res, err)
			}
			return res, err
		}
	}
	res.SandboxID = sb.ID
	log := m.log.With("sandbox_id", sb.ID)
	err := m.runIn(ctx, sb, job, res)
	if err != nil {
		log.Info("sandbox job failed", "outcome", OutcomeOf(err), "err", err)
	}
	// The teardown runs alongside then: neither waits for the other (a
	// result that waits for Redis must not keep the sandbox alive).
	var teardown time.Duration
	destroyed := make(chan struct{})
	go func() {
		defer close(destroyed)
		t := time.Now()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := sb.Destroy(cctx); derr != nil {
			log.Error("destroying sandbox", "err", derr)
		}
		teardown = time.Since(t)
	}()
	if then != nil {
		then(res, err)
	}
	<-destroyed
	res.Timings.Teardown = teardown
	return res, err
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

func (m *Manager) runIn(ctx context.Context, sb *Sandbox, job Job, res *Result) error {
	lim := sb.Limits
	ctx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errTimeout)
	defer cancel()
	// Cleanup calls below run on contexts that survive the job's.
	bg := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	}

	req := job.Request
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
	if req.MaxTasks == 0 {
		// A pooled sandbox was created with its family's RLIMIT_NPROC;
		// the agent starts this job's renderer under the job's.
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
			if o := ctxOutcome(ctx); o != "" {
				return fail(o, err, "the job ended while its sandbox started")
			}
			return fail(SandboxFailure, err, "starting the sandbox")
		}
	}
	res.Timings.Start = time.Since(t)

	t = time.Now()
	// The pool's fills give way while this runs (quiet.go); for a
	// sandbox from the pool, since the job took it.
	if sb.rendered == nil {
		sb.rendered = m.rendering()
	}
	rendered := sb.rendered
	defer rendered()
	type exchanged struct {
		resp *wire.Response
		err  error
	}
	exch := make(chan exchanged, 1)
	go func() {
		r, err := sb.Exchange(&req, input, job.Spool)
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
		kctx, kcancel := bg()
		defer kcancel()
		_ = sb.Kill(kctx)
	}

	var ex exchanged
	select {
	case <-ctx.Done():
		res.Timings.Render = time.Since(t)
		kill()
		o := ctxOutcome(ctx)
		if o == Timeout {
			return fail(Timeout, nil, "the renderer did not finish within %s", lim.Timeout)
		}
		return fail(Canceled, context.Cause(ctx), "the job was canceled")
	case ex = <-exch:
	}
	rendered()
	res.Timings.Render = time.Since(t)

	if errors.Is(ex.err, wire.ErrOutputLimit) {
		kill()
		return fail(OutputLimit, ex.err, "the sandbox sent more than %s or %d files", bytesize.String(lim.MaxOutputBytes), lim.MaxOutputFiles)
	}
	// An agent that answered has nothing more to say: the sandbox is
	// destroyed without waiting for it to exit (gVisor's teardown of the
	// container took ≈ 40 ms of every job). One
	// that did not answer is given a moment to exit, for its status.
	exited := false
	if ex.err != nil {
		select {
		case e := <-waited:
			if exited = e.err == nil; exited {
				res.ExitStatus = e.code
			} else {
				ex.err = fmt.Errorf("%w; %w", ex.err, e.err)
			}
		case <-time.After(waitGrace):
			kill()
		}
	}
	c := sb.counters()
	if ex.err != nil {
		switch {
		case c.OOMKills > 0:
			return fail(MemoryLimit, nil, "the sandbox went over its memory limit of %d MiB", lim.MemoryBytes>>20)
		case c.PidsMax > 0:
			return fail(RenderFailed, nil, "the sandbox hit its limit of %d processes and threads and died", lim.Pids)
		case errors.Is(ex.err, wire.ErrProtocol):
			// A sandbox that breaks the protocol is not trusted to say why.
			return fail(RenderFailed, ex.err, "the sandbox answered with a malformed response")
		case exited && !errors.Is(ex.err, ErrNotDelivered):
			// The agent took the job and died with it, and gVisor lived
			// to report its status: the job killed it, and would again.
			return &Error{Outcome: RenderFailed, Stderr: tailOf(sb.Stderr(), 2048),
				Msg: fmt.Sprintf("the sandbox's agent ended without answering (exit status %d)", res.ExitStatus), Err: ex.err}
		}
		return &Error{Outcome: SandboxFailure, Msg: "the sandbox ended without answering",
			Err: fmt.Errorf("%w (exit status %d, stderr: %s)", ex.err, res.ExitStatus, tailOf(sb.Stderr(), 1024))}
	}
	res.Response = ex.resp
	r := &ex.resp.Result // capped by Exchange (bound)
	switch {
	case r.OutputLimit:
		return &Error{Outcome: OutputLimit, Msg: r.Error}
	case c.OOMKills > 0:
		// Only the memory cgroup's own count says the limit killed it.
		return &Error{Outcome: MemoryLimit, Stderr: r.StderrTail,
			Msg: fmt.Sprintf("the renderer was killed at %d MiB resident; the sandbox limit is %d MiB", r.MaxRSSKiB>>10, lim.MemoryBytes>>20)}
	case r.Signal == int(syscall.SIGKILL):
		// A SIGKILL the cgroup did not count: the renderer's own doing.
		return &Error{Outcome: RenderFailed, Stderr: r.StderrTail,
			Msg: fmt.Sprintf("the renderer was killed (SIGKILL) at %d MiB resident, not by the memory limit: %s", r.MaxRSSKiB>>10, tailOf(r.StderrTail, 512))}
	case r.Signal != 0:
		return &Error{Outcome: RenderFailed, Stderr: r.StderrTail,
			Msg: fmt.Sprintf("the renderer died of signal %d: %s", r.Signal, tailOf(r.StderrTail, 512))}
	case r.ExitCode != 0:
		return &Error{Outcome: RenderFailed, Stderr: r.StderrTail,
			Msg: fmt.Sprintf("the renderer exited with status %d: %s", r.ExitCode, tailOf(r.StderrTail, 512))}
	case r.Error != "":
		return &Error{Outcome: RenderFailed, Stderr: r.StderrTail, Msg: r.Error}
	}
	return nil
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
