// Package agent is what runs inside a renderbox sandbox as its only
// entrypoint (renderbox-agent). It reads one framed request from stdin
// (wire.Request plus the input bytes), runs the renderer with the argv it
// was given — never through a shell — as the renderer's uid, and answers on
// stdout with the output files and a wire.Result. It drives Chromium over
// the DevTools pipe (cdp, with the page's request policy in policy.go) and
// LibreOffice over its UNO bridge, and in probe mode reports the sandbox's
// isolation properties as seen from inside. The same binary re-executed
// with EscapeArg, ProbeArg or UnpackArg is the renderer-side child of the
// escape attempts, the probe and the unpacker.
//
// It serves exactly one request and exits; docs/agent.md describes its
// parts and the measurements behind them.
package agent

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/renderbox/renderbox/internal/wire"
)

// maxInput bounds the input whatever the request claims; the host enforces
// its own, smaller limit before anything reaches a sandbox.
const maxInput = 1 << 30

// Agent is the state of one sandbox's agent: what it booted before the
// request (a pool's warm mode), and the request's task limit once read.
type Agent struct {
	// browser, office and primed are what a warm boot started; the job
	// that can use one takes it (sets it nil), and the others are never
	// started together.
	browser *browser
	office  *office
	primed  *primed
	// jobTasks is the request's MaxTasks once it is read: the
	// RLIMIT_NPROC of what the job starts. A renderer booted before the
	// request (a pool's) runs under the sandbox's, which the host made
	// equal.
	jobTasks uint64
	// in is the host's stream after the request: a URL page's fetches
	// are answered on it (brokerClient).
	in io.Reader
}

// Serve is the agent's main path: with args[0] == wire.WarmArg it first
// boots what args[1] asks for and says so, then it reads the request from
// in, serves it and writes the outputs and the result to out. An error is
// one the host cannot be told about (the stream to it failed).
func Serve(args []string, in io.Reader, out io.Writer) error {
	// The renderer runs as another uid (planSpawn) where the agent has
	// the capabilities for it; where it has not (the bench's native run)
	// they share one, and without this a renderer could open /proc/1/fd/1
	// and forge frames on our stdout: a non-dumpable process's /proc
	// entries are closed to other processes of the same uid.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	a := &Agent{}
	bw := bufio.NewWriterSize(out, 256<<10)
	if len(args) == 2 && args[0] == wire.WarmArg {
		if err := a.boot(args[1], bw); err != nil {
			return err
		}
	}
	res := a.serve(in, bw)
	if err := wire.WriteJSON(bw, wire.TypeResult, res); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("flushing result: %w", err)
	}
	return nil
}

// serve handles the one request and returns its result; output files, if
// any, have been written to out by then.
func (a *Agent) serve(in io.Reader, out *bufio.Writer) *wire.Result {
	start := time.Now()
	if err := makeDirs(); err != nil {
		return &wire.Result{Error: fmt.Sprintf("creating the job's directories: %v", err)}
	}
	// The input goes to a temporary name until the header names it.
	tmp, err := createTemp(wire.InputDir, ".input-")
	if err != nil {
		return &wire.Result{Error: fmt.Sprintf("creating input file: %v", err)}
	}
	br := bufio.NewReaderSize(in, 256<<10)
	a.in = br
	req, err := wire.ReadRequest(br, tmp, maxInput)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return &wire.Result{Error: fmt.Sprintf("reading request: %v", err)}
	}
	a.jobTasks = req.MaxTasks
	var res *wire.Result
	switch req.Mode {
	case wire.ModeProbe:
		os.Remove(tmp.Name())
		p, err := a.probeAsRenderer(req.Probe)
		if err != nil {
			return &wire.Result{Error: err.Error()}
		}
		res = &wire.Result{Probe: p}
	default:
		if err := os.Rename(tmp.Name(), wire.InputDir+"/"+req.InputName); err != nil {
			return &wire.Result{Error: fmt.Sprintf("naming input: %v", err)}
		}
		// The renderer reads it as another uid.
		if err := os.Chmod(wire.InputDir+"/"+req.InputName, 0o644); err != nil {
			return &wire.Result{Error: fmt.Sprintf("opening the input to the renderer: %v", err)}
		}
		res = a.render(req, out)
	}
	res.DurationMS = time.Since(start).Milliseconds()
	return res
}
