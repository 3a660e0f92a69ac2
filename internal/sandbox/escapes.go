package sandbox

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/renderbox/renderbox/internal/wire"
)

// EscapeAttempts names, in order, what the agent's escape attempts try
// (`renderbox-agent --escape-attempts`, run from a renderer's place).
var EscapeAttempts = []string{
	"ptrace the agent (pid 1)", "signal the agent (pid 1)", "write /sys", "exec a binary copied to /tmp",
	"open /dev/fuse", "read the agent's memory", "mount a tmpfs", "setuid(0)",
	"run a setuid-root binary", "raw socket", "packet socket", "write the rootfs",
	"write the rootfs as its world-writable /var/tmp", "see the host's processes", "open a host device",
	"exhaust processes", "fill /tmp",
}

// CheckEscapes judges a report of escape attempts made in a sandbox with
// limits lim: every attempt must be present and refused, and the two
// exhaustion attempts must have stopped at the sandbox's limits, not at
// the attempt's own bounds.
func CheckEscapes(as []wire.Attempt, lim Limits) []Check {
	lim = lim.WithDefaults()
	byName := map[string]wire.Attempt{}
	for _, a := range as {
		byName[a.Name] = a
	}
	var cs []Check
	for _, name := range EscapeAttempts {
		a, ok := byName[name]
		c := Check{Name: name, Pass: ok && a.Error != "", Detail: fmt.Sprintf("refused: %s %s", a.Error, a.Detail)}
		switch {
		case !ok:
			c.Detail = "the attempt is missing from the report"
		case a.Error == "":
			c.Detail = "ESCAPE: it succeeded (" + a.Detail + ")"
		case name == "exhaust processes":
			// The renderer's RLIMIT_NPROC must stop it, with EAGAIN,
			// inside the sandbox: the host's pids limit would end the
			// sandbox (and the report) instead.
			var n uint64
			if _, err := fmt.Sscanf(a.Detail, "stopped after %d processes", &n); err != nil || n >= lim.NProc ||
				!strings.Contains(a.Error, syscall.EAGAIN.Error()) {
				c.Pass, c.Detail = false, fmt.Sprintf("%q (%s), want EAGAIN before %d tasks (RLIMIT_NPROC; host pids limit %d)",
					a.Detail, a.Error, lim.NProc, lim.Pids)
			}
		case name == "fill /tmp":
			var n int64
			if _, err := fmt.Sscanf(a.Detail, "wrote %d bytes", &n); err != nil || n > lim.TmpBytes {
				c.Pass, c.Detail = false, fmt.Sprintf("%q, want at most the /tmp limit %d bytes", a.Detail, lim.TmpBytes)
			}
		}
		cs = append(cs, c)
	}
	if len(as) != len(EscapeAttempts) {
		cs = append(cs, Check{Name: "report", Detail: fmt.Sprintf("%d attempts reported, want %d", len(as), len(EscapeAttempts))})
	}
	return cs
}
