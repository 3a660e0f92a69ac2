package main

import (
	"context"
	"fmt"
	"io"

	"github.com/renderbox/renderbox/internal/worker"
)

const reapHelp = `usage: worker reap [flags]

Delete the sandboxes, bundles and cgroups a crashed worker left behind in
its state dir and cgroup parent (serve does this at start and on its way
out).
`

func cmdReap(ctx context.Context, args []string, stdout io.Writer) error {
	var c worker.Config
	if err := settings(flags("reap", reapHelp, &c), &c, args); err != nil {
		return err
	}
	m, err := c.Manager(c.Logger())
	if err != nil {
		return err
	}
	n, err := m.Reap(ctx)
	fmt.Fprintf(stdout, "reaped %d sandboxes\n", n)
	return err
}
