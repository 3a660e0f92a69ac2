// Command renderbox-agent is the only entrypoint of a renderbox sandbox. It
// reads one framed request from stdin (wire.Request plus the input bytes),
// runs the renderer with the argv it was given — never through a shell — and
// answers on stdout with the output files and a wire.Result. In probe mode it
// reports the sandbox's isolation properties as seen from inside.
//
// It is built static (CGO_ENABLED=0) and installed into the rootfs by
// rootfs/build.sh. It serves exactly one request and exits.
package main

import (
	"bufio"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/renderbox/renderbox/internal/wire"
)

// maxInput bounds the input whatever the request claims; the host enforces
// its own, smaller limit before anything reaches a sandbox.
const maxInput = 1 << 30

func main() {
	if err := keepCapsToSelf(); err != nil {
		fatal("%v", err)
	}
	if len(os.Args) == 2 && os.Args[1] == escapeArg {
		escapeAttempts()
		return
	}
	if len(os.Args) == 3 && os.Args[1] == probeArg {
		probeChild(os.Args[2])
		return
	}
	if len(os.Args) == 3 && os.Args[1] == unpackArg {
		unpackChild(os.Args[2])
		return
	}
	// The renderer runs as another uid (asRenderer) where the agent has
	// the capabilities for it; where it has not (the bench's native run)
	// they share one, and without this a renderer could open /proc/1/fd/1
	// and forge frames on our stdout: a non-dumpable process's /proc
	// entries are closed to other processes of the same uid.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fatal("prctl(PR_SET_DUMPABLE): %v", err)
	}
	out := bufio.NewWriterSize(os.Stdout, 256<<10)
	if len(os.Args) == 3 && os.Args[1] == wire.WarmArg {
		boot(os.Args[2], out)
	}
	res := serve(out)
	if err := wire.WriteJSON(out, wire.TypeResult, res); err != nil {
		fatal("writing result: %v", err)
	}
	if err := out.Flush(); err != nil {
		fatal("flushing result: %v", err)
	}
}

// serve handles the one request and returns its result; output files, if
// any, have been written to out by then.
func serve(out *bufio.Writer) *wire.Result {
	start := time.Now()
	if err := makeDirs(); err != nil {
		return &wire.Result{Error: fmt.Sprintf("creating the job's directories: %v", err)}
	}
	// The input goes to a temporary name until the header names it.
	tmp, err := createTemp(wire.InputDir, ".input-")
	if err != nil {
		return &wire.Result{Error: fmt.Sprintf("creating input file: %v", err)}
	}
	req, err := wire.ReadRequest(bufio.NewReaderSize(os.Stdin, 256<<10), tmp, maxInput)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return &wire.Result{Error: fmt.Sprintf("reading request: %v", err)}
	}
	jobTasks = req.MaxTasks
	var res *wire.Result
	switch req.Mode {
	case wire.ModeProbe:
		os.Remove(tmp.Name())
		p, err := probeAsRenderer(req.Probe)
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
		res = render(req, out)
	}
	res.DurationMS = time.Since(start).Milliseconds()
	return res
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "renderbox-agent: "+format+"\n", args...)
	os.Exit(2)
}
