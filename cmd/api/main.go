// Command api serves renderbox's HTTP API and manages API keys. It never
// renders and never runs runsc.
//
//	api serve [flags]                 serve the API (the default command)
//	api keys create -db F NAME        create a key; prints its secret once
//	api keys revoke -db F ID          revoke a key
//	api keys list -db F               list keys
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

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
)

// Config is the API's configuration; flags and RENDERBOX_* variables map
// onto it in bind.
type Config struct {
	// Addr is the listen address. Default 127.0.0.1:8080. Env RENDERBOX_ADDR.
	Addr string
	// Redis is the queue's Redis address. Default 127.0.0.1:6379. Env
	// RENDERBOX_REDIS.
	Redis string
	// DB is the SQLite ledger file. Default /var/lib/renderbox/ledger.db.
	// Env RENDERBOX_DB.
	DB string
	// Retention is how long inputs and outputs are kept. Default 24h.
	Retention time.Duration
	// Limits: request body, queue depth, per-key rate, ?wait= bound.
	Limits api.Limits
}

func (c *Config) bind(fs *flag.FlagSet) {
	env := func(k, d string) string {
		if v := os.Getenv("RENDERBOX_" + k); v != "" {
			return v
		}
		return d
	}
	fs.StringVar(&c.Addr, "addr", env("ADDR", "127.0.0.1:8080"), "listen address")
	fs.StringVar(&c.Redis, "redis", env("REDIS", "127.0.0.1:6379"), "Redis address")
	fs.StringVar(&c.DB, "db", env("DB", "/var/lib/renderbox/ledger.db"), "SQLite ledger file")
	fs.DurationVar(&c.Retention, "retention", 24*time.Hour, "how long inputs and outputs are kept")
	fs.Int64Var(&c.Limits.MaxBodyBytes, "max-body-bytes", 64<<20, "largest request body (413 past it)")
	fs.IntVar(&c.Limits.MaxQueueDepth, "max-queue-depth", 1000, "most jobs waiting or running (503 past it)")
	fs.Float64Var(&c.Limits.RatePerSecond, "rate", 20, "submissions per second per key (429 past it)")
	fs.IntVar(&c.Limits.Burst, "burst", 40, "submission burst per key")
	fs.DurationVar(&c.Limits.MaxWait, "max-wait", 60*time.Second, "longest ?wait=")
}

func (c Config) validate() error {
	if c.Limits.MaxBodyBytes < 1024 || c.Limits.MaxQueueDepth < 1 || c.Limits.RatePerSecond <= 0 || c.Limits.Burst < 1 {
		return errors.New("config: -max-body-bytes ≥ 1024, -max-queue-depth ≥ 1, -rate > 0 and -burst ≥ 1 are required")
	}
	if c.Retention < time.Minute {
		return fmt.Errorf("config: -retention %s is under a minute", c.Retention)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "keys") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, args)
	case "keys":
		err = keys(ctx, args)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "api: %v\n", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, args []string) error {
	var c Config
	fs := flag.NewFlagSet("api serve", flag.ContinueOnError)
	c.bind(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	store, err := ledger.Open(ctx, c.DB)
	if err != nil {
		return fmt.Errorf("opening the ledger %s: %w", c.DB, err)
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: c.Redis})
	defer rdb.Close()
	s := &api.Server{OpenAPI: renderbox.OpenAPI, Ledger: store, Queue: queue.New(rdb, c.Retention), Logger: log, Limits: c.Limits}
	srv := &http.Server{Addr: c.Addr, Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.RunEvents(ctx); err != nil {
			log.Error("applying events", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("api listening", "addr", c.Addr, "redis", c.Redis, "db", c.DB)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func keys(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: api keys create|revoke|list [-db FILE] [NAME|ID]")
	}
	sub := args[0]
	fs := flag.NewFlagSet("api keys "+sub, flag.ContinueOnError)
	var c Config
	c.bind(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	store, err := ledger.Open(ctx, c.DB)
	if err != nil {
		return fmt.Errorf("opening the ledger %s: %w", c.DB, err)
	}
	defer store.Close()
	switch sub {
	case "create":
		if fs.NArg() != 1 {
			return errors.New("usage: api keys create NAME")
		}
		secret, k, err := store.CreateKey(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "created key %s (%s); the secret below is shown once:\n", k.ID, k.Name)
		fmt.Println(secret)
	case "revoke":
		if fs.NArg() != 1 {
			return errors.New("usage: api keys revoke ID")
		}
		if err := store.RevokeKey(ctx, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Printf("revoked %s\n", fs.Arg(0))
	case "list":
		ks, err := store.ListKeys(ctx)
		if err != nil {
			return err
		}
		for _, k := range ks {
			state := "active"
			if k.Revoked() {
				state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
			}
			fmt.Printf("%s\t%s\t%s\t%s\n", k.ID, k.Name, k.CreatedAt.UTC().Format(time.RFC3339), state)
		}
	default:
		return fmt.Errorf("unknown keys command %q (create, revoke, list)", sub)
	}
	return nil
}
