package main

import (
	"context"
	"flag"

	"github.com/renderbox/renderbox/internal/worker"
)

const serveHelp = `usage: worker serve [flags]

Run the start-up checks (worker check's), then take render jobs from Redis
until SIGTERM or SIGINT; then take no more, let running jobs finish for
-shutdown-timeout, requeue the rest and reap every sandbox. The log is JSON
on stderr from its first line to its last.
`

func cmdServe(ctx context.Context, args []string) error {
	var c worker.Config
	var s worker.ServeConfig
	if err := settings(serveFlags(&c, &s), &c, args); err != nil {
		return err
	}
	return worker.Serve(ctx, c, s)
}

// serveFlags is serve's flag set: the worker's settings and serve's own.
func serveFlags(c *worker.Config, s *worker.ServeConfig) *flag.FlagSet {
	fs := flags("serve", serveHelp, c)
	s.Bind(fs)
	return fs
}
