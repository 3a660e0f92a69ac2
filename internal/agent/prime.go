package agent

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/renderbox/renderbox/internal/wire"
)

// primed is the program a pool sandbox's agent started before its request
// (wire.WarmExec): it has loaded its libraries and blocks reading stdin.
// runStep hands it the first step when that step is this program, or kills
// it.
type primed struct {
	cmd   *exec.Cmd // its Args and Env are what a step must match
	stdin io.WriteCloser
	out   *switchWriter // discards until its job: output before it is nobody's
	// nproc is the RLIMIT_NPROC it was started under.
	nproc uint64
}

// startPrimed starts argv with env as runStep would start a step, as the
// renderer, its stdin a pipe.
func (a *Agent) startPrimed(argv, env []string) (*primed, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("warm exec: no argv")
	}
	p := &primed{out: &switchWriter{}}
	p.cmd = stepCmd(argv, env, p.out)
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.nproc, err = a.rendererNProc(); err != nil {
		return nil, err
	}
	if err := a.start(p.cmd); err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	return p, nil
}

// serves reports whether the primed program is st's: the same argv and
// environment, reading the input on stdin, its output to the tail, under
// the RLIMIT_NPROC the job's would get from a.
func (p *primed) serves(st wire.Step, env []string, a *Agent) bool {
	if st.Stdin == "" || st.Stdout != "" || !slices.Equal(st.Argv, p.cmd.Args) || !slices.Equal(env, p.cmd.Env) {
		return false
	}
	n, err := a.rendererNProc()
	return err == nil && n == p.nproc && p.alive()
}

// alive reports whether the program is still waiting: one that died while
// idle would fail the job for nothing, where a fresh start serves it.
func (p *primed) alive() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == 0 // WNOHANG: no child has changed state
}

// run feeds st's stdin file to the primed program and waits for it, as
// runStep does for a program it starts.
func (p *primed) run(st wire.Step, tail *tail, res *wire.Result) bool {
	p.out.set(tail)
	res.Primed = true
	f, err := os.Open(st.Stdin)
	if err != nil {
		p.kill()
		res.Error = fmt.Sprintf("opening %s: %v", st.Stdin, err)
		return false
	}
	// A program that exits before it has read everything closes the
	// pipe: its exit status says what went wrong, not the copy.
	_, _ = io.Copy(p.stdin, f)
	f.Close()
	p.stdin.Close()
	return finishStep(p.cmd, res)
}

// kill ends the primed program and its process group.
func (p *primed) kill() {
	p.stdin.Close()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
}
