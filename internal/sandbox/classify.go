package sandbox

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/renderbox/renderbox/internal/bytesize"
	"github.com/renderbox/renderbox/internal/wire"
)

// ending is what the host saw of a job's end in its sandbox: everything
// classify needs, read before the sandbox is destroyed.
type ending struct {
	limits Limits
	// ended is Timeout or Canceled when the job's context ended before
	// the sandbox answered, cause the context's cause; "" otherwise.
	ended Outcome
	cause error
	// resp and exchErr are the exchange's answer.
	resp    *wire.Response
	exchErr error
	// exited: the agent, not having answered, exited with exitStatus.
	exited     bool
	exitStatus int
	// stderr is the sandbox's own (runsc's and the agent's), read when
	// the agent did not answer.
	stderr   string
	counters counters
}

// classify says how a job ended: nil when it succeeded, else an *Error
// whose Outcome is the API's error code. It judges only what the host saw
// (the cgroup's counters, the exchange's error), and of the agent's answer
// only what a subverted agent could not use to pass a failure off as
// another (TestClassify).
func classify(e ending) error {
	lim, c := e.limits, e.counters
	switch e.ended {
	case Timeout:
		return fail(Timeout, nil, "the renderer did not finish within %s", lim.Timeout)
	case Canceled:
		return fail(Canceled, e.cause, "the job was canceled")
	}
	if errors.Is(e.exchErr, wire.ErrOutputLimit) {
		return fail(OutputLimit, e.exchErr, "the sandbox sent more than %s or %d files", bytesize.String(lim.MaxOutputBytes), lim.MaxOutputFiles)
	}
	if e.exchErr != nil {
		switch {
		case c.OOMKills > 0:
			return fail(MemoryLimit, nil, "the sandbox went over its memory limit of %d MiB", lim.MemoryBytes>>20)
		case c.PidsMax > 0:
			return fail(RenderFailed, nil, "the sandbox hit its limit of %d processes and threads and died", lim.Pids)
		case errors.Is(e.exchErr, wire.ErrProtocol):
			// A sandbox that breaks the protocol is not trusted to say why.
			return fail(RenderFailed, e.exchErr, "the sandbox answered with a malformed response")
		case e.exited && !errors.Is(e.exchErr, ErrNotDelivered):
			// The agent took the job and died with it, and gVisor lived
			// to report its status: the job killed it, and would again.
			return &Error{Outcome: RenderFailed, Stderr: tailOf(e.stderr, 2048),
				Msg: fmt.Sprintf("the sandbox's agent ended without answering (exit status %d)", e.exitStatus), Err: e.exchErr}
		}
		status := -1
		if e.exited {
			status = e.exitStatus
		}
		return &Error{Outcome: SandboxFailure, Msg: "the sandbox ended without answering",
			Err: fmt.Errorf("%w (exit status %d, stderr: %s)", e.exchErr, status, tailOf(e.stderr, 1024))}
	}
	r := &e.resp.Result // capped by Exchange (bound)
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
