package wire

import (
	"encoding/json"
	"fmt"
	"io"
)

// Warm kinds: what a pre-booted agent starts before it reads its request.
const (
	WarmNone    = ""        // nothing: the agent only waits on stdin
	WarmBrowser = "browser" // Chromium on the DevTools pipe, at a blank page
	WarmOffice  = "office"  // LibreOffice listening for one conversion
	// WarmExec starts Argv with Env as the renderer would be, before the
	// request, its stdin a pipe the agent holds: the program loads its
	// libraries and blocks reading its input. A request whose first step
	// is that argv and environment and reads its input on stdin
	// (Step.Stdin) gets it; any other is served as if nothing had started.
	WarmExec = "exec"
)

// WarmArg is the agent's argument that selects warm mode; the next argument
// is the JSON Warm. Both come from the worker's catalogue, never from a job.
const WarmArg = "--warm"

// Warm tells a pre-booted agent what to boot before it reads its one
// request. A request that does not match what was booted (another argv or
// environment) is served cold, as if nothing had been booted.
type Warm struct {
	Kind string `json:"kind"`
	// Argv is the renderer and its fixed flags (Chromium's, as in a
	// Browser request; the whole step's for WarmExec).
	Argv []string `json:"argv,omitempty"`
	// Env is the renderer's whole environment.
	Env []string `json:"env,omitempty"`
}

// Ready is the frame a warm agent writes once it has booted, before it
// reads its request. Error set means the boot failed: the agent still
// serves its request, cold.
type Ready struct {
	Kind   string `json:"kind"`
	BootMS int64  `json:"boot_ms"`
	Error  string `json:"error,omitempty"`
}

// ReadReady reads the Ready frame a warm agent writes first.
func ReadReady(r io.Reader) (*Ready, error) {
	typ, p, err := NewReader(r).Next()
	if err != nil {
		return nil, fmt.Errorf("reading the ready frame: %w", err)
	}
	if typ != TypeReady {
		return nil, protoErr("expected a ready frame, got %q", typ)
	}
	var rd Ready
	if err := json.Unmarshal(p, &rd); err != nil {
		return nil, protoErr("ready frame: %v", err)
	}
	return &rd, nil
}
