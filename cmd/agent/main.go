// Command renderbox-agent is the only entrypoint of a renderbox sandbox
// (package agent). It is built static (CGO_ENABLED=0) and installed into
// the rootfs by rootfs/build.sh; it serves exactly one request and exits.
package main

import (
	"fmt"
	"os"

	"github.com/renderbox/renderbox/internal/agent"
)

func main() {
	if err := agent.KeepCapsToSelf(); err != nil {
		fatal(err)
	}
	args := os.Args[1:]
	switch {
	case len(args) == 1 && args[0] == agent.EscapeArg:
		agent.EscapeAttempts(os.Stdout)
	case len(args) == 2 && args[0] == agent.ProbeArg:
		if err := agent.Probe(args[1], os.Stdout); err != nil {
			fatal(err)
		}
	case len(args) == 2 && args[0] == agent.UnpackArg:
		os.Exit(agent.Unpack(args[1], os.Stderr))
	default:
		if err := agent.Serve(args, os.Stdin, os.Stdout); err != nil {
			fatal(err)
		}
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "renderbox-agent: %v\n", err)
	os.Exit(2)
}
