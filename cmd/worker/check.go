package main

import (
	"context"
	"fmt"
	"io"

	"github.com/renderbox/renderbox/internal/hostcheck"
	"github.com/renderbox/renderbox/internal/worker"
)

const checkHelp = `usage: worker check [flags]

Run the start-up checks serve runs — runsc's version, cgroups, swap, huge
pages, the rootfs's digest, image and age, the state dir's lock and reap,
the self-test of cold, pre-booted and restored sandboxes — and print PASS,
WARN, SKIP or FAIL for each. Beside a running worker it leaves that
worker's sandboxes alone and runs the self-test in a state dir of its own.
`

func cmdCheck(ctx context.Context, args []string, stdout io.Writer) error {
	var c worker.Config
	if err := settings(flags("check", checkHelp, &c), &c, args); err != nil {
		return err
	}
	_, _, err := hostcheck.Preflight(ctx, c.Host(c.Logger()), hostcheck.Text(stdout), true /* pooled */, false /* serving */)
	if err == nil {
		fmt.Fprintln(stdout, "worker: ready")
	}
	return err
}
