package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

// State is a sandbox's place in its life. Transitions only go forward:
// New → Created → Running → Stopped → Destroyed; Destroy is allowed from
// any state and is idempotent.
type State int

const (
	StateNew State = iota
	StateCreated
	StateRunning
	StateStopped
	StateDestroyed
)

func (s State) String() string {
	return [...]string{"new", "created", "running", "stopped", "destroyed"}[s]
}

// Sandbox is one single-use gVisor container. It serves exactly one request.
type Sandbox struct {
	// ID names the container to runsc, its bundle and its cgroup.
	ID string
	// Limits are the sandbox's: those it was made with, or lower ones a
	// job's take wrote into its cgroup (Lower).
	Limits Limits

	runsc  *Runsc
	bundle string // bundle directory, removed by Destroy
	cgroup string // cgroupsPath of the spec
	noSwap bool   // the spec caps memory+swap at the memory limit
	// cpuPending: the cgroup's CPU quota is still the one the sandbox
	// booted with (SpecOptions.BootCPUs), above Limits.CPUs.
	cpuPending bool
	// native is the rootfs tree when the sandbox is a native process
	// without gVisor (Manager.UseUnsafeNative, native.go); "" for gVisor.
	native string

	mu    sync.Mutex
	state State

	// Host ends of the container's stdio.
	stdin  *os.File
	stdout *os.File
	stderr *ring
	// The container's ends, closed once runsc create has handed them over.
	childFiles []*os.File

	// rendered ends the job's count at the Manager's Gate, from the
	// pool's Take or the render's start to the response; idempotent.
	rendered func()

	// The sandbox process's end, from the moment runsc handed it over
	// (adopt).
	exit *exit

	destroyOnce sync.Once
	destroyErr  error
}

// State returns the sandbox's current state.
func (s *Sandbox) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// transition moves from one of the states in from to the state to.
func (s *Sandbox) transition(to State, from ...State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range from {
		if s.state == f {
			s.state = to
			return nil
		}
	}
	return fmt.Errorf("sandbox %s: cannot go to %s from %s", s.ID, to, s.state)
}

// writeBundle writes the bundle directory: config.json and nothing else.
// The root is the shared rootfs, referenced by absolute path.
func writeBundle(dir string, o SpecOptions) error {
	spec, err := BuildSpec(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating bundle: %w", err)
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("writing bundle: %w", err)
	}
	return nil
}

// Create runs `runsc create` with fresh pipes as the container's stdio.
// After it the sandbox exists (its Sentry and gofer are running) but the
// agent has not started: this is the step a pool can take ahead of a job.
func (s *Sandbox) Create(ctx context.Context) error {
	if err := s.transition(StateCreated, StateNew); err != nil {
		return err
	}
	return s.spawn(ctx, func(pidFile string, in, out, errw *os.File) error {
		if s.native != "" {
			return s.nativeCreate(ctx, pidFile, in, out, errw)
		}
		return s.runsc.Create(ctx, s.ID, CreateOpts{Bundle: s.bundle, PidFile: pidFile, Stdin: in, Stdout: out, Stderr: errw})
	})
}

// spawn runs a runsc command that makes the sandbox (create, or restore)
// with fresh pipes as the container's stdio.
func (s *Sandbox) spawn(ctx context.Context, run func(pidFile string, in, out, errw *os.File) error) error {
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return err
	}
	s.stdin, s.stdout = inW, outR
	s.childFiles = []*os.File{inR, outW, errW}
	s.stderr = &ring{n: 16 << 10}
	go func() { _, _ = io.Copy(s.stderr, errR); errR.Close() }()

	pidFile := filepath.Join(s.bundle, "sandbox.pid")
	if err = adopt(); err == nil {
		err = run(pidFile, inR, outW, errW)
	}
	if err == nil {
		// runsc (not the sandbox) writes this: the host pid of the
		// sandbox process, whose end this process waits for and which a
		// kill reaches without a runsc start-up.
		pid := 0
		b, rerr := os.ReadFile(pidFile)
		if rerr == nil {
			pid, rerr = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if rerr != nil || pid <= 1 {
			err = fmt.Errorf("reading the sandbox's pid file: %v (%q)", rerr, b)
		} else {
			s.exit = watchPid(pid)
		}
	}
	// The sandbox holds its own copies now; ours would keep the pipes open.
	for _, f := range s.childFiles {
		f.Close()
	}
	s.childFiles = nil
	if err != nil {
		// runsc create reports on the container's stderr, which is ours.
		time.Sleep(50 * time.Millisecond)
		return fmt.Errorf("%w (stderr: %s)", err, strings.TrimSpace(s.stderr.String()))
	}
	return nil
}

// Start starts the agent in a created sandbox.
func (s *Sandbox) Start(ctx context.Context) error {
	if err := s.transition(StateRunning, StateCreated); err != nil {
		return err
	}
	if s.native != "" {
		return nil // its process runs since Create
	}
	return s.runsc.Start(ctx, s.ID)
}

// Alive reports whether a created or started sandbox has not ended.
func (s *Sandbox) Alive() bool {
	if s.exit != nil {
		select {
		case <-s.exit.done:
			return false
		default:
		}
	}
	st := s.State()
	return st == StateCreated || st == StateRunning
}

// ErrNotDelivered means the agent was gone before it had read the whole
// request: whatever ended it, the job had no part in it.
var ErrNotDelivered = errors.New("the request did not reach the agent")

// ErrGone means the sandbox ended without its container's exit status:
// killed from outside, or gVisor itself failed (see exit.status).
var ErrGone = errors.New("the sandbox ended without its container's status")

// Exchange sends the request and reads the response with the sandbox's
// output caps, the files' bytes to spool when it is not nil. It returns an
// error wrapping wire.ErrOutputLimit as soon as the sandbox sends too much;
// the caller then kills it.
func (s *Sandbox) Exchange(req *wire.Request, input io.Reader, spool wire.Spool) (*wire.Response, error) {
	return s.ExchangeWith(req, input, spool, nil)
}

// ExchangeWith is Exchange with a broker answering the agent's fetches
// (a URL page's): the agent's stdin then stays open for the answers
// until the response has been read.
func (s *Sandbox) ExchangeWith(req *wire.Request, input io.Reader, spool wire.Spool, broker wire.Broker) (*wire.Response, error) {
	if s.State() != StateRunning {
		return nil, fmt.Errorf("sandbox %s: exchange in state %s", s.ID, s.State())
	}
	if s.cpuPending {
		// Nothing but the agent has run yet: the request is the first
		// thing from outside, and it goes only under the job's quota.
		if err := lowerCPU(s.cgroup, s.Limits.CPUs); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotDelivered, err)
		}
		s.cpuPending = false
	}
	werr := make(chan error, 1)
	go func() {
		err := wire.WriteRequest(s.stdin, req, input)
		if broker == nil {
			s.stdin.Close()
		}
		werr <- err
	}()
	lim := wire.Limits{MaxBytes: s.Limits.MaxOutputBytes, MaxFiles: s.Limits.MaxOutputFiles}
	if broker != nil {
		lim.Broker, lim.Answers = broker, s.stdin
		defer s.stdin.Close()
	}
	resp, err := wire.ReadResponseTo(s.stdout, lim, spool)
	if err != nil {
		// Did the agent take the job before it went? A write to a dead
		// agent fails at once (EPIPE); one still blocked after its stdout
		// closed never reached it either.
		select {
		case e := <-werr:
			if e != nil {
				return nil, fmt.Errorf("%w: %v (reading: %v)", ErrNotDelivered, e, err)
			}
		case <-time.After(time.Second):
			return nil, fmt.Errorf("%w: still sending (reading: %v)", ErrNotDelivered, err)
		}
		return nil, err
	}
	// The agent answers only after reading the whole request.
	if err := <-werr; err != nil {
		return nil, fmt.Errorf("sending request: %w", err)
	}
	bound(&resp.Result, req.Mode)
	return resp, nil
}

// maxErrorText and maxStderrText cap what a sandbox says of a failure.
const (
	maxErrorText  = 2048
	maxStderrText = 8192
)

// bound caps what a sandbox says of its job before anything keeps it (the
// ledger, the event stream, webhooks, logs): the honest agent says no
// more, a subverted one could fill a result frame (wire.MaxFrame) with it.
// Output files are bounded by ReadResponse (names, sizes, count, digests).
func bound(r *wire.Result, mode string) {
	r.Error = headOf(r.Error, maxErrorText)
	r.StderrTail = tailOf(r.StderrTail, maxStderrText)
	r.Blocked = wire.Diagnostics(r.Blocked)
	r.Missing = wire.Diagnostics(r.Missing)
	r.ConsoleErrors = wire.Diagnostics(r.ConsoleErrors)
	if mode != wire.ModeProbe {
		r.Probe = nil // only the self-test asks for one, from a sandbox no job has had
	}
}

// Wait waits for the agent to exit and returns its exit status: the
// status the sandbox process ended with, or an error wrapping ErrGone
// when gVisor did not live to say it.
func (s *Sandbox) Wait(ctx context.Context) (int, error) {
	if s.exit == nil || s.State() < StateRunning {
		return -1, fmt.Errorf("sandbox %s: wait in state %s", s.ID, s.State())
	}
	select {
	case <-s.exit.done:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	_ = s.transition(StateStopped, StateRunning)
	return s.exit.status()
}

// Kill kills every process in the sandbox.
//
// SIGKILL to the sandbox process on the host ends the user-space kernel and
// everything in it at once, without waiting for a runsc process to start
// (which on a loaded host takes long enough to miss a deadline); `runsc
// kill` follows for the container's own bookkeeping.
func (s *Sandbox) Kill(ctx context.Context) error {
	if s.native != "" {
		s.nativeKill()
		return nil
	}
	if s.exit != nil {
		s.exit.signal(syscall.SIGKILL)
	}
	return s.runsc.Kill(ctx, s.ID, KillOpts{Signal: 9, All: true})
}

// Stderr returns the tail of what runsc and the container wrote to stderr.
func (s *Sandbox) Stderr() string {
	if s.stderr == nil {
		return ""
	}
	return s.stderr.String()
}

// counters reads the cgroup's OOM and pids counters; call before Destroy.
func (s *Sandbox) counters() counters { return readCounters(s.cgroup) }

// Destroy kills and deletes the container, closes the pipes, and removes the
// bundle and the cgroups. It tries every step whatever fails, joins the
// errors, and does the work once; later calls return the first result.
// Pass a fresh context: cleanup must run even when the job's is dead.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.destroyOnce.Do(func() {
		s.mu.Lock()
		prev := s.state
		s.state = StateDestroyed
		s.mu.Unlock()
		if s.rendered != nil {
			s.rendered()
		}
		var errs []error
		if prev != StateNew && s.native != "" {
			s.nativeKill()
		} else if prev != StateNew {
			if err := s.end(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		for _, f := range []*os.File{s.stdin, s.stdout} {
			if f != nil {
				f.Close()
			}
		}
		if err := os.RemoveAll(s.bundle); err != nil {
			errs = append(errs, fmt.Errorf("removing bundle: %w", err))
		}
		if err := removeCgroup(s.cgroup); err != nil {
			errs = append(errs, err)
		}
		s.destroyErr = errors.Join(errs...)
	})
	return s.destroyErr
}

// endWait bounds how long end waits for a killed sandbox process to be
// reaped before it leaves the container to the reaper.
const endWait = 10 * time.Second

// end ends a runsc sandbox and removes what runsc keeps of it, without a
// runsc process when this process watches the sandbox's.
//
// `runsc delete --force` of a sandbox's one container kills the sandbox
// process and waits for it, kills the gofer, removes the cgroups, the
// control socket and the state and lock files, and removes self-backed
// overlay files (none here: the root is read-only). This process is the
// sandbox's subreaper and Destroy removes the cgroups (killing the gofer
// with them), so it does the rest itself: a runsc process fewer a job,
// and its CPU (docs/benchmarks.md, "Teardown without runsc").
// A sandbox it does not watch (spawn failed after runsc made the
// container) goes through `runsc delete`, and then loses the socket that
// leaves.
func (s *Sandbox) end(ctx context.Context) error {
	if s.exit == nil {
		if err := s.runsc.Delete(ctx, s.ID, DeleteOpts{Force: true}); err != nil && s.exists(ctx) {
			return err
		}
		return s.runsc.removeState(s.ID)
	}
	s.exit.signal(syscall.SIGKILL)
	t := time.NewTimer(endWait)
	defer t.Stop()
	select {
	case <-s.exit.done:
	case <-ctx.Done():
		return fmt.Errorf("sandbox %s: waiting for its process to end: %w", s.ID, ctx.Err())
	case <-t.C:
		// Its state stays for the reaper (reap.go) to find.
		return fmt.Errorf("sandbox %s: its process (pid %d) did not end within %v of SIGKILL", s.ID, s.exit.pid, endWait)
	}
	return s.runsc.removeState(s.ID)
}

// exists reports whether runsc still knows the container.
func (s *Sandbox) exists(ctx context.Context) bool {
	cs, err := s.runsc.List(ctx)
	if err != nil {
		return true
	}
	for _, c := range cs {
		if c.ID == s.ID {
			return true
		}
	}
	return false
}

// Restore makes a new sandbox from a checkpoint image instead of creating
// and starting it: `runsc restore` creates the container with fresh stdio
// and the checkpointed agent resumes in it, reading the new stdin and
// writing the new stdout.
func (s *Sandbox) Restore(ctx context.Context, imageDir string) error {
	if s.native != "" {
		return fmt.Errorf("sandbox %s: a native sandbox cannot be restored", s.ID)
	}
	if err := s.transition(StateRunning, StateNew); err != nil {
		return err
	}
	err := s.spawn(ctx, func(pidFile string, in, out, errw *os.File) error {
		return s.runsc.Restore(ctx, s.ID, RestoreOpts{Bundle: s.bundle, ImagePath: imageDir, PidFile: pidFile,
			Stdin: in, Stdout: out, Stderr: errw})
	})
	return err
}

// Checkpoint saves the running sandbox into the image directory dir, its
// pages of zeroes left out, for Restore to make copies of it.
func (s *Sandbox) Checkpoint(ctx context.Context, dir string) error {
	if s.native != "" {
		return fmt.Errorf("sandbox %s: a native sandbox cannot be checkpointed", s.ID)
	}
	return s.runsc.Checkpoint(ctx, s.ID, CheckpointOpts{ImagePath: dir, ExcludeZeroPages: true})
}

// ReadReady reads the Ready frame an agent started with wire.WarmArg
// sends once its renderer is booted.
func (s *Sandbox) ReadReady() (*wire.Ready, error) { return wire.ReadReady(s.stdout) }

// Lower lowers the sandbox's cgroup limits (memory, CPU, pids) to lim's
// and makes lim its Limits, for a job that takes a sandbox made with
// higher ones. The limits the spec fixes (tmpfs, rlimits) stay: the
// caller checks that lim keeps them and raises nothing.
func (s *Sandbox) Lower(lim Limits) error {
	if err := lowerCgroup(s.cgroup, lim, s.noSwap); err != nil {
		return err
	}
	s.Limits, s.cpuPending = lim, false
	return nil
}

// MemoryUsage returns the bytes the sandbox's memory cgroup charges now, 0
// when it cannot be read.
func (s *Sandbox) MemoryUsage() int64 { return memoryUsage(s.cgroup) }

// CountRender counts the sandbox's job as rendering at g from now until
// its answer arrives or the sandbox is destroyed: a job from the pool
// counts from its take, so that fills give way to it at once.
func (s *Sandbox) CountRender(g *Gate) { s.rendered = g.Enter() }
