//go:build !unit

package sandbox_test

// These tests run real sandboxes: real runsc, the real rootfs, real cgroups.
// testenv.Manager fails each test that leaves a container, bundle or cgroup
// behind.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/testenv/exe"
	"github.com/renderbox/renderbox/internal/wire"
)

// shJob runs a shell script as the renderer. Only tests do this: the
// catalogue never builds argv from a shell string.
func shJob(script string, lim sandbox.Limits) sandbox.Job {
	return sandbox.Job{
		Request: wire.Request{
			Mode:      wire.ModeRender,
			Argv:      []string{"/bin/sh", "-c", script},
			Env:       []string{"PATH=/usr/bin:/bin"},
			InputName: "input",
		},
		Limits: lim,
	}
}

func wantOutcome(t *testing.T, err error, want sandbox.Outcome) *sandbox.Error {
	t.Helper()
	got := sandbox.OutcomeOf(err)
	if got != want {
		t.Fatalf("outcome = %s, want %s (err: %v)", got, want, err)
	}
	var e *sandbox.Error
	errors.As(err, &e)
	return e
}

func TestIsolationFromInside(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	canary := testenv.Canary(t, "127.0.0.1:0")
	lim := sandbox.Limits{TmpBytes: 64 << 20}.WithDefaults()
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{Mode: wire.ModeProbe, Probe: &wire.ProbeRequest{
			Dial:    []string{canary.Addr(), "127.0.0.1:22", "[::1]:80"},
			FillTmp: 80 << 20,
		}},
		Limits: lim,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Response.Result.Probe
	if p == nil {
		t.Fatal("no probe report")
	}
	// The individual facts, asserted here rather than only through
	// CheckProbe, so a bug there cannot hide one.
	// The probe runs as a renderer does.
	if p.UID != wire.RendererUID || p.EUID != wire.RendererUID || p.GID != wire.RendererGID {
		t.Errorf("uid/euid/gid = %d/%d/%d, want the renderer's %d", p.UID, p.EUID, p.GID, wire.RendererUID)
	}
	for name, v := range map[string]string{"CapInh": p.CapInh, "CapPrm": p.CapPrm, "CapEff": p.CapEff, "CapAmb": p.CapAmb} {
		if v != "0000000000000000" {
			t.Errorf("%s = %q, want all zero", name, v)
		}
	}
	// Inherited from the agent, and granting nothing without the others.
	if p.CapBnd != "00000000000000e0" && p.CapBnd != "0000000000000000" {
		t.Errorf("CapBnd = %q, want at most CAP_KILL|CAP_SETGID|CAP_SETUID", p.CapBnd)
	}
	// The agent: another uid, with only the capabilities that start
	// renderers as the renderer's and kill them.
	if a := p.Agent; a == nil || a.UID != sandbox.AgentUID || a.GID != sandbox.AgentGID ||
		a.CapEff != "00000000000000e0" || a.CapPrm != "00000000000000e0" || a.CapInh != "0000000000000000" || a.CapAmb != "0000000000000000" {
		t.Errorf("agent = %+v, want uid %d with CapEff=CapPrm=e0 and nothing inheritable or ambient", a, sandbox.AgentUID)
	}
	if p.SysWriteError == "" || !slices.ContainsFunc(p.Mounts, func(m string) bool {
		f := strings.Fields(m)
		return len(f) >= 4 && f[1] == "/sys" && f[2] == "tmpfs" && slices.Contains(strings.Split(f[3], ","), "ro")
	}) {
		t.Errorf("writing /sys: %q, mounts %q; want the write refused and /sys a read-only tmpfs", p.SysWriteError, p.Mounts)
	}
	if !strings.Contains(p.TmpExecError, "permission denied") {
		t.Errorf("running a binary copied to /tmp: %q, want permission denied (noexec)", p.TmpExecError)
	}
	if p.FuseError == "" {
		t.Errorf("/dev/fuse opened as a device (%s)", p.FuseDetail)
	}
	if p.NoNewPrivs != "1" {
		t.Errorf("NoNewPrivs = %q, want 1", p.NoNewPrivs)
	}
	if len(p.Interfaces) != 1 || p.Interfaces[0] != "lo" {
		t.Errorf("interfaces = %v, want [lo]", p.Interfaces)
	}
	for _, d := range p.Dials {
		if d.Error == "" {
			t.Errorf("dial %s from inside the sandbox connected", d.Addr)
		}
	}
	if n := canary.Hits(); n != 0 {
		t.Errorf("host listener accepted %d connections from the sandbox, want 0", n)
	}
	if !strings.Contains(p.RootWriteError, "read-only file system") {
		t.Errorf("writing the rootfs: %q, want a read-only file system error", p.RootWriteError)
	}
	if p.TmpWriteError != "" {
		t.Errorf("writing /tmp: %v, want success", p.TmpWriteError)
	}
	if p.TmpSizeBytes != 64<<20 || p.TmpFillError != "ENOSPC" || p.TmpFilled > 64<<20 {
		t.Errorf("/tmp size %d, filled %d then %q; want size 64 MiB and ENOSPC before 64 MiB", p.TmpSizeBytes, p.TmpFilled, p.TmpFillError)
	}
	if !strings.Contains(p.KernelLog, "Starting gVisor") {
		t.Errorf("kernel log %q does not come from gVisor (uname %s %s)", p.KernelLog, p.Sysname, p.Release)
	}
	for _, c := range sandbox.CheckProbe(p, lim, canary.Hits()) {
		if !c.Pass {
			t.Errorf("self-test check %q failed: %s", c.Name, c.Detail)
		}
	}
}

func TestEscapeAttemptsFail(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{Mode: wire.ModeProbe, Probe: &wire.ProbeRequest{Escape: true}},
		// RLIMIT_NPROC follows from the pids limit: the process-exhaustion
		// attempt must hit it well within its 5s, and before the host's.
		Limits: sandbox.Limits{Pids: 256, Timeout: 60 * time.Second, TmpBytes: 64 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	lim := sandbox.Limits{Pids: 256, TmpBytes: 64 << 20}.WithDefaults()
	for _, c := range sandbox.CheckEscapes(res.Response.Result.Probe.Escapes, lim) {
		if !c.Pass {
			t.Errorf("%s: %s", c.Name, c.Detail)
		} else {
			t.Logf("%-50s %s", c.Name, c.Detail)
		}
	}
}

func TestSelfTestPasses(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	checks, err := m.SelfTest(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) < 10 {
		t.Errorf("self-test ran %d checks, want at least 10", len(checks))
	}
	for _, c := range sandbox.Failed(checks) {
		t.Errorf("FAIL %s: %s", c.Name, c.Detail)
	}
}

func TestEndlessLoopTimesOut(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	const timeout = 2 * time.Second
	start := time.Now()
	res, err := m.Run(context.Background(), shJob("while :; do :; done", sandbox.Limits{Timeout: timeout}))
	total := time.Since(start)
	wantOutcome(t, err, sandbox.Timeout)
	// The deadline covers start and render; the kill must land within a
	// second of it. Deletion follows and may be slow on a loaded host,
	// but it is bounded too.
	if killed := res.Timings.Start + res.Timings.Render; killed > timeout+time.Second {
		t.Errorf("the sandbox was killed %v after start (%+v), want within deadline %v + 1s", killed, res.Timings, timeout)
	}
	if total > timeout+res.Timings.Create+5*time.Second {
		t.Errorf("Run took %v (%+v), want teardown within 5s of the deadline", total, res.Timings)
	}
}

func TestMemoryHog(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	// perl-base is in every Debian rootfs; a 1 GiB string in a 256 MiB box.
	job := sandbox.Job{
		Request: wire.Request{
			Mode: wire.ModeRender, InputName: "input",
			Argv: []string{"/usr/bin/perl", "-e", `my $x = "a" x (1024*1024*1024); print length($x)`},
		},
		Limits: sandbox.Limits{MemoryBytes: 256 << 20, Timeout: 30 * time.Second},
	}
	_, err := m.Run(context.Background(), job)
	wantOutcome(t, err, sandbox.MemoryLimit)
}

// A renderer that kills itself is not a memory hog: memory_limit comes only
// from the memory cgroup's OOM count.
func TestSelfKillIsNotMemoryLimit(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	_, err := m.Run(context.Background(), shJob("kill -KILL $$", sandbox.Limits{}))
	e := wantOutcome(t, err, sandbox.RenderFailed)
	if !strings.Contains(e.Msg, "SIGKILL") || !strings.Contains(e.Msg, "not by the memory limit") {
		t.Errorf("message %q, want it to say SIGKILL and not the memory limit", e.Msg)
	}
}

func TestForkBombIsContained(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Pids: 128, NProc: 256, Timeout: 5 * time.Second}
	sb, err := m.Prepare(context.Background(), lim)
	if err != nil {
		t.Fatal(err)
	}
	// Watch the sandbox's host footprint while the bomb goes off.
	var peak atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if n, err := sb.Pids(); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	_, err = m.RunIn(context.Background(), sb, shJob(`f() { f | f & }; f; sleep 20`, lim))
	close(stop)
	<-watched
	if sandbox.OutcomeOf(err) == sandbox.Succeeded {
		t.Fatal("fork bomb succeeded, want the job to fail")
	}
	t.Logf("fork bomb ended as %s after peaking at %d host tasks: %v", sandbox.OutcomeOf(err), peak.Load(), err)
	if sandbox.OutcomeOf(err).Retryable() {
		t.Errorf("fork bomb ended as retryable %s; a hostile job must not run twice", sandbox.OutcomeOf(err))
	}
	if p := peak.Load(); p == 0 || p > lim.Pids {
		t.Errorf("the sandbox peaked at %d host tasks, want between 1 and its limit %d", p, lim.Pids)
	}
	// The host still forks and still runs sandboxes.
	if err := exec.Command("/bin/true").Run(); err != nil {
		t.Errorf("the host cannot fork after the bomb: %v", err)
	}
	if _, err := m.Run(context.Background(), shJob("true", sandbox.Limits{})); err != nil {
		t.Errorf("a job after the fork bomb failed: %v", err)
	}
}

// The renderer runs as another uid than the agent: neither a signal nor
// ptrace reaches it, and the job ends as the renderer's own failure.
func TestRendererCannotSignalTheAgent(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	_, err := m.Run(context.Background(), shJob("kill -TERM 1 && echo 'the agent was signalled' > /tmp/out/x", sandbox.Limits{}))
	e := wantOutcome(t, err, sandbox.RenderFailed)
	if !strings.Contains(e.Stderr, "kill") || !strings.Contains(e.Stderr, "not permitted") {
		t.Errorf("stderr tail %q does not show the refused kill", e.Stderr)
	}
}

// An agent that dies with its job while gVisor is healthy is the job's
// failure, not the sandbox's: it would die again, so it is not retried.
func TestAgentDeathIsRenderFailed(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	sb, err := m.Prepare(context.Background(), lim)
	if err != nil {
		t.Fatal(err)
	}
	// The host kills the agent alone (the container's init, not --all):
	// what a renderer could do if it shared the agent's uid.
	go func() {
		time.Sleep(3 * time.Second)
		_ = m.Runsc().Kill(context.Background(), sb.ID, sandbox.KillOpts{Signal: 9})
	}()
	t0 := time.Now()
	_, err = m.RunIn(context.Background(), sb, shJob("sleep 25", lim))
	e := wantOutcome(t, err, sandbox.RenderFailed)
	if !strings.Contains(e.Msg, "agent ended without answering") || time.Since(t0) > 15*time.Second {
		t.Errorf("after %s: %v; want the agent's death reported at once", time.Since(t0), err)
	}
}

// The worker is its sandboxes' parent (adopt.go): their status comes from
// wait4, not a `runsc wait` per sandbox. A sandbox process killed from
// outside (as the host's OOM killer would) did not report its agent's
// status: the job's sandbox failed, and it is retried.
func TestSandboxKilledFromOutsideIsSandboxFailure(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{Timeout: 30 * time.Second}
	sb, err := m.Prepare(context.Background(), lim)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := m.Runsc().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, c := range cs {
		if c.ID == sb.ID {
			pid = c.Pid
		}
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("sandbox process %d: %v", pid, err)
	}
	// "pid (comm) state ppid …"
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	if ppid, _ := strconv.Atoi(f[1]); ppid != os.Getpid() {
		t.Errorf("the sandbox process's parent is %d, want this process (%d): it was not adopted", ppid, os.Getpid())
	}
	go func() {
		time.Sleep(3 * time.Second)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}()
	t0 := time.Now()
	_, err = m.RunIn(context.Background(), sb, shJob("sleep 25", lim))
	e := wantOutcome(t, err, sandbox.SandboxFailure)
	if !errors.Is(err, sandbox.ErrGone) || !strings.Contains(e.Error(), "killed") || time.Since(t0) > 15*time.Second {
		t.Errorf("after %s: %v; want the sandbox's death (killed, ErrGone) reported at once", time.Since(t0), err)
	}
}

func TestOutputFloodAgentLimit(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	_, err := m.Run(context.Background(), shJob("head -c 20000000 /dev/zero > /tmp/out/big",
		sandbox.Limits{MaxOutputBytes: 1 << 20}))
	wantOutcome(t, err, sandbox.OutputLimit)
}

func TestOutputFloodHostCap(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	// The agent is told it may send 100 MB; the host reads at most 1 MiB
	// and must kill the sandbox the moment the stream passes that.
	job := shJob("head -c 20000000 /dev/zero > /tmp/out/big", sandbox.Limits{MaxOutputBytes: 1 << 20})
	job.Request.MaxOutputBytes = 100 << 20
	_, err := m.Run(context.Background(), job)
	e := wantOutcome(t, err, sandbox.OutputLimit)
	if !errors.Is(e, wire.ErrOutputLimit) {
		t.Errorf("output_limit did not come from the host's reader: %v", err)
	}
}

func TestRendererCannotForgeTheAgentsStdout(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	// The agent is pid 1 and non-dumpable: its stdout is out of reach.
	_, err := m.Run(context.Background(), shJob("echo forged > /proc/1/fd/1", sandbox.Limits{}))
	e := wantOutcome(t, err, sandbox.RenderFailed)
	if !strings.Contains(e.Stderr, "/proc/1/fd/1") {
		t.Errorf("stderr tail %q does not show the refused open", e.Stderr)
	}
}

// A subverted agent (here tail, in the agent's place in a real sandbox,
// answering with a result frame the job's input carries) fills its result
// with diagnostics: the host keeps what the honest agent would send, 20 of
// each list at 200 bytes each, and no probe report it did not ask for.
func TestSubvertedAgentsWordsAreCapped(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	blocked := make([]string, 1000)
	for i := range blocked {
		blocked[i] = fmt.Sprintf("https://evil.invalid/%04d/%s", i, strings.Repeat("b", 100))
	}
	said, err := json.Marshal(wire.Result{
		StderrTail:    strings.Repeat("s", 50_000),
		Blocked:       blocked,
		Missing:       []string{strings.Repeat("m", 60_000)},
		ConsoleErrors: []string{strings.Repeat("é", 150), "uncaught: " + strings.Repeat("€", 100)},
		Probe:         &wire.ProbeReport{Hostname: strings.Repeat("h", 1000)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var frame bytes.Buffer
	if err := wire.WriteFrame(&frame, wire.TypeResult, said); err != nil {
		t.Fatal(err)
	}
	// The input is the last frame on the agent's stdin, and is one frame
	// (the host sends 256 KiB a frame): its payload is what tail sends back.
	if frame.Len() > 256<<10 {
		t.Fatalf("the forged result is %d bytes, over one input frame", frame.Len())
	}
	sb, err := m.PrepareProcess(context.Background(), sandbox.Limits{}, []string{"/usr/bin/tail", "-c", strconv.Itoa(frame.Len())})
	if err != nil {
		t.Fatal(err)
	}
	job := shJob("true", sandbox.Limits{})
	job.Request.InputSize, job.Input = int64(frame.Len()), bytes.NewReader(frame.Bytes())
	res, err := m.RunIn(context.Background(), sb, job)
	if err != nil {
		t.Fatalf("the forged result was not taken: %v", err)
	}
	r := res.Response.Result
	for name, list := range map[string][]string{"blocked": r.Blocked, "missing": r.Missing, "console_errors": r.ConsoleErrors} {
		if len(list) == 0 || len(list) > wire.MaxDiagnostics {
			t.Errorf("%s: kept %d entries, want 1 to %d", name, len(list), wire.MaxDiagnostics)
		}
		for _, s := range list {
			if len(s) > wire.MaxDiagnosticBytes || !utf8.ValidString(s) {
				t.Errorf("%s: kept a %d-byte entry (valid UTF-8: %v), want at most %d", name, len(s), utf8.ValidString(s), wire.MaxDiagnosticBytes)
			}
		}
	}
	if len(r.Blocked) != wire.MaxDiagnostics || !strings.HasPrefix(r.Blocked[0], "https://evil.invalid/0000/") || !strings.HasSuffix(r.Missing[0], "m…") {
		t.Errorf("kept %d blocked from %.40q, missing %.40q…; want the first %d, cut and marked", len(r.Blocked), r.Blocked[0], r.Missing[0], wire.MaxDiagnostics)
	}
	if len(r.StderrTail) > 8192+len("…") || r.Probe != nil {
		t.Errorf("kept a %d-byte stderr tail and probe %v, want at most 8 KiB and none", len(r.StderrTail), r.Probe != nil)
	}
}

func TestFailingRendererReportsStderr(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	_, err := m.Run(context.Background(), shJob("echo 'boom: cannot parse page 3' >&2; exit 3", sandbox.Limits{}))
	e := wantOutcome(t, err, sandbox.RenderFailed)
	if !strings.Contains(e.Stderr, "boom: cannot parse page 3") || !strings.Contains(e.Msg, "status 3") {
		t.Errorf("render_failed = %q with stderr %q, want status 3 and the stderr tail", e.Msg, e.Stderr)
	}
}

func TestTmpIsFreshPerJob(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	if _, err := m.Run(context.Background(), shJob("echo secret > /tmp/left-behind && test -s /tmp/left-behind", sandbox.Limits{})); err != nil {
		t.Fatalf("first job: %v", err)
	}
	_, err := m.Run(context.Background(), shJob("ls -la /tmp >&2; test ! -e /tmp/left-behind", sandbox.Limits{}))
	if err != nil {
		t.Fatalf("the second job sees the first job's file: %v", err)
	}
}

func TestInputInOutputsOut(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	in := strings.Repeat("renderbox ", 300_000) // 3 MB: several frames
	job := shJob("tr a-z A-Z < /tmp/in/input > /tmp/out/upper.txt && wc -c < /tmp/in/input > /tmp/out/count.txt", sandbox.Limits{})
	job.Request.InputSize = int64(len(in))
	job.Input = strings.NewReader(in)
	res, err := m.Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	files := res.Response.Files
	if len(files) != 2 || files[0].Name != "count.txt" || files[1].Name != "upper.txt" {
		t.Fatalf("outputs = %v, want count.txt and upper.txt", names(files))
	}
	if got := strings.TrimSpace(string(files[0].Data)); got != "3000000" {
		t.Errorf("the sandbox saw %s input bytes, want 3000000", got)
	}
	if string(files[1].Data) != strings.ToUpper(in) {
		t.Errorf("upper.txt differs from the upper-cased input")
	}
}

func names(fs []wire.File) []string {
	var n []string
	for _, f := range fs {
		n = append(n, f.Name)
	}
	return n
}

func TestCancelKillsTheSandbox(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	res, err := m.Run(ctx, shJob("sleep 60", sandbox.Limits{}))
	wantOutcome(t, err, sandbox.Canceled)
	// Killed within a second of the cancel; deletion follows.
	if d := time.Since(start) - res.Timings.Teardown; d > 2500*time.Millisecond {
		t.Errorf("cancel took effect after %v (%+v), want within 1s of the cancel at 1.5s", d, res.Timings)
	}
}

func TestPreparedAheadOfTheJob(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	sb, err := m.Prepare(context.Background(), sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State() != sandbox.StateCreated {
		t.Fatalf("prepared sandbox is %s, want created", sb.State())
	}
	time.Sleep(200 * time.Millisecond) // the job arrives later
	res, err := m.RunIn(context.Background(), sb, shJob("echo ok > /tmp/out/ok", sandbox.Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Response.Files) != 1 || string(res.Response.Files[0].Data) != "ok\n" {
		t.Errorf("outputs = %v", names(res.Response.Files))
	}
	if sb.State() != sandbox.StateDestroyed {
		t.Errorf("after RunIn the sandbox is %s, want destroyed", sb.State())
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Errorf("a second Destroy failed: %v", err)
	}
	if err := sb.Start(context.Background()); err == nil {
		t.Error("Start after Destroy succeeded, want a state error")
	}
}

// A sandbox boots at sandbox.BootCPUs, so that runsc, its gofer and the
// Sentry are not throttled while they start; the job's own quota is in the
// cgroup before the request reaches the agent, and holds: two spinning
// processes get no more than the job's half CPU.
// Not parallel: it measures CPU.
func TestJobRunsUnderItsCPUQuota(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	lim := sandbox.Limits{CPUs: 0.5, Timeout: 30 * time.Second}
	sb, err := m.Prepare(context.Background(), lim)
	if err != nil {
		t.Fatal(err)
	}
	quota := func() string {
		q := cgroupValue(t, m, sb, "cpu/cpu.cfs_quota_us", "cpu.max")
		return strings.Fields(q)[0]
	}
	if got, want := quota(), strconv.Itoa(sandbox.BootCPUs*100_000); got != want {
		t.Errorf("quota of a created sandbox = %s, want %s (BootCPUs)", got, want)
	}
	spin := "timeout 4 sh -c 'while :; do :; done' & timeout 4 sh -c 'while :; do :; done' & wait"
	done := make(chan error, 1)
	go func() {
		_, err := m.RunIn(context.Background(), sb, shJob(spin, lim))
		done <- err
	}()
	// The quota is lowered before the request is written, so by the time
	// the spinners run it is the job's.
	for q := quota(); q != "50000"; q = quota() {
		select {
		case <-done:
			t.Fatalf("the job ran under quota %s, want 50000", q)
		case <-time.After(5 * time.Millisecond):
		}
	}
	time.Sleep(time.Second)
	u0, t0 := cpuUsage(t, m, sb), time.Now()
	time.Sleep(2 * time.Second)
	used := (cpuUsage(t, m, sb) - u0).Seconds() / time.Since(t0).Seconds()
	if used > 0.5*1.2 || used < 0.2 {
		t.Errorf("two spinners used %.2f CPUs under a 0.5 CPU quota, want 0.2–0.6", used)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// cpuUsage reads the CPU time sb's cgroup has used.
func cpuUsage(t *testing.T, m *sandbox.Manager, sb *sandbox.Sandbox) time.Duration {
	t.Helper()
	// v1: cpuacct.usage in ns; v2: cpu.stat, "usage_usec N" first.
	v, unit := cgroupValue(t, m, sb, "cpuacct/cpuacct.usage", "cpu.stat"), time.Nanosecond
	if f := strings.Fields(v); len(f) > 1 && f[0] == "usage_usec" {
		v, unit = f[1], time.Microsecond
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(n) * unit
}

func TestRunscFailureIsSandboxFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := filepath.Join(dir, "runsc")
	exe.Write(t, fake, "#!/bin/sh\necho 'runsc: simulated failure' >&2\nexit 128\n")
	m, err := sandbox.NewManager(sandbox.Config{
		Runsc: fake, Rootfs: testenv.RootfsDir(t),
		StateDir: "/run/renderbox-test/fake-" + filepath.Base(dir), CgroupParent: "renderbox-test-fake-" + filepath.Base(dir),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll("/run/renderbox-test/fake-" + filepath.Base(dir))
	_, err = m.Run(context.Background(), shJob("true", sandbox.Limits{}))
	e := wantOutcome(t, err, sandbox.SandboxFailure)
	if !sandbox.OutcomeOf(err).Retryable() || !strings.Contains(e.Error(), "simulated failure") {
		t.Errorf("sandbox_failure = %v, want retryable and runsc's stderr kept", err)
	}
	if _, err := os.Stat(filepath.Join("/run/renderbox-test/fake-"+filepath.Base(dir), "bundles")); err == nil {
		if ents, _ := os.ReadDir(filepath.Join("/run/renderbox-test/fake-"+filepath.Base(dir), "bundles")); len(ents) != 0 {
			t.Errorf("bundles left after a failed create: %d", len(ents))
		}
	}
}
