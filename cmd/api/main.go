// Command api serves renderbox's HTTP API and manages API keys; the
// commands and their settings are internal/apiserver's. It never renders
// and never runs runsc.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/renderbox/renderbox/internal/apiserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := apiserver.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
