// Command api serves renderbox's HTTP API. It never renders and never runs
// runsc. This version serves the renderer catalogue, health and the
// contract; the job routes arrive with the queue and the ledger.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
)

// Config is the API's configuration.
type Config struct {
	// Addr is the listen address. Default 127.0.0.1:8080. Env RENDERBOX_ADDR.
	Addr string
}

func main() {
	var c Config
	flag.StringVar(&c.Addr, "addr", os.Getenv("RENDERBOX_ADDR"), "listen address (default 127.0.0.1:8080)")
	flag.Parse()
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8080"
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	srv := &http.Server{
		Addr:              c.Addr,
		Handler:           (&api.Server{OpenAPI: renderbox.OpenAPI, Logger: log}).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("api listening", "addr", c.Addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "api: %v\n", err)
		os.Exit(1)
	}
}
