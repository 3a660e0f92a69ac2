package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// TypeJSON is the media type of JSON outputs.
const TypeJSON = "application/json"

// diagnostics are renderers for operators, not clients: they run like any
// job (queue, worker, fresh sandbox, outputs back through Redis) but the API
// accepts them only when started with -diagnostics, and GET /v1/renderers
// does not list them.
var diagnostics = map[string]*Renderer{
	"sandbox-probe": {
		Name: "sandbox-probe",
		Description: "Try to escape from where a renderer runs: ptrace, mount, setuid, setuid binaries, raw and packet " +
			"sockets, writing the rootfs, host /proc, host devices, exhausting processes and /tmp. Each attempt " +
			"and how it was refused is reported in escapes.json. The input is ignored.",
		Inputs:        []string{TypeText},
		Output:        TypeJSON,
		MaxInputBytes: 1 << 10,
		// Few processes (RLIMIT_NPROC follows from the pids limit), so
		// the exhaustion attempt reaches its limit within seconds; the
		// light renderers' /tmp, so the probe runs where they do, a
		// pre-booted sandbox of their pool included.
		Limits: jobspec.Limits{Timeout: 60 * time.Second, Pids: 256, TmpBytes: lightTmp},
		build: func(inputFile, Values, jobspec.Limits) (wire.Request, error) {
			return wire.Request{Env: plainEnv, Steps: []wire.Step{{
				Argv:   []string{jobspec.AgentPath, "--escape-attempts"},
				Stdout: wire.OutputDir + "/escapes.json",
			}}}, nil
		},
	},
}

// LookupWithDiagnostics is Lookup that also finds the operators'
// diagnostic renderers. The worker uses it (whatever is on the queue was
// accepted by the API); the API only when the operator enabled them.
func LookupWithDiagnostics(name string) (*Renderer, error) {
	if r, ok := diagnostics[name]; ok {
		return r, nil
	}
	r, err := Lookup(name)
	if err != nil {
		var ns []string
		for n := range diagnostics {
			ns = append(ns, n)
		}
		return nil, fmt.Errorf("%w (diagnostics: %s)", err, strings.Join(ns, ", "))
	}
	return r, nil
}
