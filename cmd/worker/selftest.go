package main

import (
	"context"
	"fmt"
	"io"

	"github.com/renderbox/renderbox/internal/hostcheck"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/worker"
)

const selftestHelp = `usage: worker selftest [flags]

Run the isolation probe in real sandboxes, cold, pre-booted and restored,
and the renderers' fresh-entropy jobs, and print PASS or FAIL for each
property. It needs runsc, cgroups and the rootfs, not Redis; beside a
running worker it works in a state dir of its own.
`

func cmdSelftest(ctx context.Context, args []string, stdout io.Writer) error {
	var c worker.Config
	if err := settings(flags("selftest", selftestHelp, &c), &c, args); err != nil {
		return err
	}
	log := c.Logger()
	m, err := c.Runnable(ctx, log)
	if err != nil {
		return err
	}
	m, cleanup, err := c.LockOrPrivate(m, log)
	if err != nil {
		return err
	}
	defer cleanup()
	checks, err := hostcheck.SelfTest(ctx, m)
	if err != nil {
		return err
	}
	hostcheck.Print(hostcheck.Text(stdout), checks)
	if f := sandbox.Failed(checks); len(f) > 0 {
		return fmt.Errorf("self-test: %d of %d isolation properties failed", len(f), len(checks))
	}
	fmt.Fprintf(stdout, "self-test: all %d isolation properties hold\n", len(checks))
	return nil
}
