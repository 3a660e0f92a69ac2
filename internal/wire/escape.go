package wire

// EscapeArg is the agent's argument that runs it as the escape-attempt
// child: it acts as an exploited renderer would and prints its []Attempt
// as JSON on stdout.
const EscapeArg = "--escape-attempts"

// The escape attempts, by the Name the agent reports and the host's
// checker looks for.
const (
	EscapePtrace        = "ptrace the agent (pid 1)"
	EscapeSignal        = "signal the agent (pid 1)"
	EscapeWriteSys      = "write /sys"
	EscapeExecTmp       = "exec a binary copied to /tmp"
	EscapeFuse          = "open /dev/fuse"
	EscapeReadMemory    = "read the agent's memory"
	EscapeMount         = "mount a tmpfs"
	EscapeSetuid        = "setuid(0)"
	EscapeSetuidBinary  = "run a setuid-root binary"
	EscapeRawSocket     = "raw socket"
	EscapePacketSocket  = "packet socket"
	EscapeWriteRootfs   = "write the rootfs"
	EscapeWriteVarTmp   = "write the rootfs as its world-writable /var/tmp"
	EscapeHostProcesses = "see the host's processes"
	EscapeHostDevice    = "open a host device"
	// EscapeProcesses reports how many it started in Attempt.Processes.
	EscapeProcesses = "exhaust processes"
	// EscapeFillTmp reports how many bytes it wrote in Attempt.Bytes.
	EscapeFillTmp = "fill /tmp"
)

// EscapeAttempts is every attempt, in the order the agent makes them.
var EscapeAttempts = []string{
	EscapePtrace, EscapeSignal, EscapeWriteSys, EscapeExecTmp, EscapeFuse, EscapeReadMemory, EscapeMount,
	EscapeSetuid, EscapeSetuidBinary, EscapeRawSocket, EscapePacketSocket, EscapeWriteRootfs,
	EscapeWriteVarTmp, EscapeHostProcesses, EscapeHostDevice, EscapeProcesses, EscapeFillTmp,
}
