package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/renderbox/renderbox/internal/envflag"

	"github.com/renderbox/renderbox/internal/worker"
)

const serveHelp = `usage: worker serve [flags]

Run the start-up checks (worker check's), then take render jobs from Redis
until SIGTERM or SIGINT; then take no more, let running jobs finish for
-shutdown-timeout, requeue the rest and reap every sandbox. The log is JSON
on stderr from its first line to its last.
`

func cmdServe(ctx context.Context, args []string) error {
	c, s, err := serveSettings(args)
	if err != nil {
		return err
	}
	return worker.Serve(ctx, c, s)
}

// serveSettings parses serve's command line and settles its settings.
// -unsafe-native-bench has no variable: an environment file must not turn
// the sandbox off.
func serveSettings(args []string) (worker.Config, worker.ServeConfig, error) {
	var c worker.Config
	var s worker.ServeConfig
	fs := serveFlags(&c, &s)
	if _, err := parse(fs, args, 0); err != nil {
		return c, s, err
	}
	if err := refuseUnsafeVar(); err != nil {
		return c, s, err
	}
	return c, s, c.Settle(fs, worker.UnsafeNativeFlag)
}

// refuseUnsafeVar refuses a variable for -unsafe-native-bench: rendering
// without gVisor is asked for on the command line, where it is seen, or
// not at all.
func refuseUnsafeVar() error {
	if v := envflag.Var(worker.UnsafeNativeFlag); os.Getenv(v) != "" {
		return usageError(fmt.Sprintf("%s is set: -%s (jobs WITHOUT gVisor, a benchmark floor) is taken only from the command line; unset it", v, worker.UnsafeNativeFlag))
	}
	return nil
}

// serveFlags is serve's flag set: the worker's settings and serve's own.
func serveFlags(c *worker.Config, s *worker.ServeConfig) *flag.FlagSet {
	fs := flags("serve", serveHelp, c)
	s.Bind(fs)
	return fs
}
