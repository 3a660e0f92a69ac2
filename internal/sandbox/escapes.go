package sandbox

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/renderbox/renderbox/internal/wire"
)

// CheckEscapes judges a report of the agent's escape attempts
// (wire.EscapeAttempts, made from a renderer's place) in a sandbox with
// limits lim (resolved, as Sandbox.Limits): every attempt must be present and refused, and the two
// exhaustion attempts must have stopped at the sandbox's limits, not at
// the attempt's own bounds.
func CheckEscapes(as []wire.Attempt, lim Limits) []Check {
	byName := map[string]wire.Attempt{}
	for _, a := range as {
		byName[a.Name] = a
	}
	var cs []Check
	for _, name := range wire.EscapeAttempts {
		a, ok := byName[name]
		c := Check{Name: name, Pass: ok && a.Error != "", Detail: fmt.Sprintf("refused: %s %s", a.Error, a.Detail)}
		switch {
		case !ok:
			c.Detail = "the attempt is missing from the report"
		case a.Error == "":
			c.Detail = "ESCAPE: it succeeded (" + a.Detail + ")"
		case name == wire.EscapeProcesses:
			// The renderer's RLIMIT_NPROC must stop it, with EAGAIN,
			// inside the sandbox: the host's pids limit would end the
			// sandbox (and the report) instead.
			if a.Processes >= lim.NProc || !strings.Contains(a.Error, syscall.EAGAIN.Error()) {
				c.Pass, c.Detail = false, fmt.Sprintf("%q (%s), want EAGAIN before %d tasks (RLIMIT_NPROC; host pids limit %d)",
					a.Detail, a.Error, lim.NProc, lim.Pids)
			}
		case name == wire.EscapeFillTmp:
			if a.Bytes > lim.TmpBytes {
				c.Pass, c.Detail = false, fmt.Sprintf("%q, want at most the /tmp limit %d bytes", a.Detail, lim.TmpBytes)
			}
		}
		cs = append(cs, c)
	}
	if len(as) != len(wire.EscapeAttempts) {
		cs = append(cs, Check{Name: "report", Detail: fmt.Sprintf("%d attempts reported, want %d", len(as), len(wire.EscapeAttempts))})
	}
	return cs
}
