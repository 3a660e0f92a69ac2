package agent

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/renderbox/renderbox/internal/wire"
)

// render runs the steps (and the browser or office conversion, if any) and
// streams the outputs to out.
func (a *Agent) render(req *wire.Request, out *bufio.Writer) *wire.Result {
	tail := newTail(req.StderrTail)
	res := &wire.Result{}
	steps := req.Steps
	if req.Unpack != nil {
		st, err := unpackStep(req.Unpack)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		steps = append([]wire.Step{st}, steps...)
	}
	for _, st := range steps {
		if !a.runStep(st, req.Env, tail, res) {
			res.StderrTail = tail.String()
			return res
		}
	}
	var err error
	switch {
	case req.Browser != nil:
		err = a.browse(req.Browser, req.Env, tail, res, out)
	case req.Office != nil:
		err = a.runOffice(req.Office, req.Env, tail, res)
	}
	if err == nil {
		for _, st := range req.After {
			if !a.runStep(st, req.Env, tail, res) {
				res.StderrTail = tail.String()
				return res
			}
		}
	}
	if err != nil {
		// The renderer's own words (Chromium's, LibreOffice's) are the
		// job's error, unless how it ended says more (a signal, a status).
		res.Error = err.Error()
		fmt.Fprintf(tail, "renderbox-agent: %v\n", err)
		res.StderrTail = tail.String()
		return res
	}
	res.StderrTail = tail.String()
	files, size, err := listOutputs(wire.OutputDir)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	if len(files) > req.MaxOutputFiles || size > req.MaxOutputBytes {
		res.OutputLimit = true
		res.Error = fmt.Sprintf("renderer wrote %d files, %d bytes; the limits are %d files, %d bytes",
			len(files), size, req.MaxOutputFiles, req.MaxOutputBytes)
		return res
	}
	for _, f := range files {
		info, err := sendFile(out, f)
		if err != nil {
			// The stream is now inconsistent; the host sees a protocol error.
			res.Error = err.Error()
			return res
		}
		res.Files = append(res.Files, info)
	}
	return res
}

// runStep runs one program to completion and records how it ended in res.
// It reports whether the job may go on. The program started before the
// request, if any, runs the step when it is the step's, else it is killed.
func (a *Agent) runStep(st wire.Step, env []string, tail *tail, res *wire.Result) bool {
	if env == nil {
		env = []string{} // never inherit ours
	}
	if p := a.primed; p != nil {
		a.primed = nil
		if p.serves(st, env, a) {
			return p.run(st, tail, res)
		}
		p.kill()
	}
	cmd := stepCmd(st.Argv, env, tail)
	if st.Stdout != "" {
		// Read by the next step, which runs as the renderer.
		f, err := os.OpenFile(st.Stdout, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			res.Error = fmt.Sprintf("creating %s: %v", st.Stdout, err)
			return false
		}
		defer f.Close()
		cmd.Stdout = f
	}
	if st.Stdin != "" {
		f, err := os.Open(st.Stdin)
		if err != nil {
			res.Error = fmt.Sprintf("opening %s: %v", st.Stdin, err)
			return false
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if err := a.start(cmd); err != nil {
		res.Error = fmt.Sprintf("starting %s: %v", st.Argv[0], err)
		return false
	}
	return finishStep(cmd, res)
}

// stepCmd is a step's program: env its whole environment, in the work
// directory, stdout and stderr to out, in its own process group (so
// whatever it leaves running is killed with it), killed if the agent dies.
func stepCmd(argv, env []string, out io.Writer) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = wire.WorkDir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// finishStep waits for a started step, kills what it left in its process
// group and records how it ended.
func finishStep(cmd *exec.Cmd, res *wire.Result) bool {
	_ = cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	recordExit(cmd.ProcessState, res)
	return res.ExitCode == 0 && res.Signal == 0
}

// recordExit copies a finished process's status into res.
func recordExit(st *os.ProcessState, res *wire.Result) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode, res.Signal = -1, int(ws.Signal())
	} else {
		res.ExitCode = st.ExitCode()
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > res.MaxRSSKiB {
		res.MaxRSSKiB = ru.Maxrss
	}
}

// start starts cmd as planSpawn says: as the renderer's uid, with an
// RLIMIT_NPROC lowered so that a fork bomb in the renderer hits it while the
// agent can still create the threads it needs to report. The lower soft
// limit is inherited across fork; ours is restored right after. gVisor
// enforces it with EAGAIN; the host's pids limit, sized above it, backs it
// (TestForkBombIsContained, the escape attempts).
func (a *Agent) start(cmd *exec.Cmd) error {
	// Again before each start: a sandbox restored from a checkpoint gets
	// the spec's capability sets back.
	if err := KeepCapsToSelf(); err != nil {
		return err
	}
	var lim syscall.Rlimit
	limErr := syscall.Getrlimit(unix.RLIMIT_NPROC, &lim)
	plan := planSpawn(os.Getuid(), lim.Cur, a.jobTasks)
	plan.apply(cmd)
	if limErr != nil {
		return cmd.Start()
	}
	child := lim
	child.Cur = plan.NProc
	if err := syscall.Setrlimit(unix.RLIMIT_NPROC, &child); err != nil {
		return fmt.Errorf("lowering RLIMIT_NPROC for the renderer: %w", err)
	}
	err := cmd.Start()
	if rerr := syscall.Setrlimit(unix.RLIMIT_NPROC, &lim); rerr != nil && err == nil {
		err = fmt.Errorf("restoring RLIMIT_NPROC: %w", rerr)
	}
	return err
}

// rendererNProc is the RLIMIT_NPROC start gives a renderer now.
func (a *Agent) rendererNProc() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
		return 0, err
	}
	return planSpawn(os.Getuid(), lim.Cur, a.jobTasks).NProc, nil
}

// listOutputs lists the regular files in dir, sorted by name.
func listOutputs(dir string) ([]string, int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("listing outputs: %w", err)
	}
	var names []string
	var size int64
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return nil, 0, fmt.Errorf("output %q is not a regular file", e.Name())
		}
		if !wire.ValidName(e.Name()) {
			return nil, 0, fmt.Errorf("output name %q is not allowed", e.Name())
		}
		info, err := e.Info()
		if err != nil {
			return nil, 0, fmt.Errorf("output %q: %w", e.Name(), err)
		}
		names = append(names, e.Name())
		size += info.Size()
	}
	sort.Strings(names)
	return names, size, nil
}

// sendFile streams one output file as a File frame and Data frames.
func sendFile(out io.Writer, name string) (wire.FileInfo, error) {
	// O_NONBLOCK: a FIFO swapped in after the listing must not hang us
	// (the renderer owns the directory); Stat below refuses it.
	f, err := os.OpenFile(filepath.Join(wire.OutputDir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return wire.FileInfo{}, fmt.Errorf("opening output %q: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return wire.FileInfo{}, fmt.Errorf("output %q is not a regular file", name)
	}
	if err := wire.WriteJSON(out, wire.TypeFile, wire.FileHeader{Name: name, Size: st.Size()}); err != nil {
		return wire.FileInfo{}, err
	}
	h := sha256.New()
	n, err := wire.WriteChunks(out, wire.TypeData, io.TeeReader(io.LimitReader(f, st.Size()), h))
	if err != nil {
		return wire.FileInfo{}, fmt.Errorf("sending output %q: %w", name, err)
	}
	if n != st.Size() {
		return wire.FileInfo{}, errors.New("output changed while it was sent")
	}
	return wire.FileInfo{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// tail keeps the last n bytes written to it.
type tail struct {
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	if t.n <= 0 {
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	if len(t.buf) > t.n {
		return string(t.buf[len(t.buf)-t.n:])
	}
	return string(t.buf)
}
