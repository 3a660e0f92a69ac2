// Command renderbox is the API's command-line client; its commands are
// internal/cli's, built on package client.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/renderbox/renderbox/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
