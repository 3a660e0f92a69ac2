// Package apiserver is the api command: its settings (Config, each flag
// with its RENDERBOX_* variable), serve, which wires the ledger, Redis,
// webhooks and internal/api's handlers into the listening server, and the
// keys commands. It never renders and never runs runsc.
//
//	api serve [flags]                 serve the API (the default command)
//	api keys create -db F NAME        create a key; prints its secret once
//	api keys create -admin -db F NAME an admin key: also GET /v1/workers
//	api keys revoke -db F ID          revoke a key
//	api keys list -db F               list keys
//	api -version                      print the build and exit
//
// Any other command is refused with the usage before anything is opened:
// "api version" once ran serve, which opened the live ledger and Redis.
//
// The ledger (-db) is a SQLite file or a PostgreSQL URL; a URL with a
// password comes from RENDERBOX_DB or a file (-db-file), never from a
// flag value, which ps shows to every user of the host.
package apiserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/blobs"
	"github.com/renderbox/renderbox/internal/buildinfo"
	"github.com/renderbox/renderbox/internal/bytesize"
	"github.com/renderbox/renderbox/internal/cidr"
	"github.com/renderbox/renderbox/internal/contract"
	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/envflag"
	"github.com/renderbox/renderbox/internal/fetch"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/tracing"
	"github.com/renderbox/renderbox/internal/webhook"
)

// Config is the API's configuration. Flags map onto it in bind, and each
// flag's RENDERBOX_* variable of the same name (envflag) in settle;
// docs/settings.md lists them all.
type Config struct {
	// Addr is the listen address. Default 127.0.0.1:8080. Env RENDERBOX_ADDR.
	Addr string
	// PublicURL is the base URL clients reach the API at, e.g.
	// https://render.example.com or https://example.com/render behind a
	// proxy that strips /render: Location, output URLs and webhooks' URLs
	// are absolute under it. Default none: relative URLs (never from the
	// request's Host header, which the client writes). Env
	// RENDERBOX_PUBLIC_URL.
	PublicURL string
	// MetricsAddr serves /metrics, apart from the API: the metrics show
	// every tenant's jobs, so only the operator should reach them. ""
	// disables. Default 127.0.0.1:9090. Env RENDERBOX_METRICS_ADDR.
	MetricsAddr string
	// Redis is how to reach the queue's Redis (address, credentials, TLS;
	// see queue.RedisConfig). Default 127.0.0.1:6379.
	Redis queue.RedisConfig
	// WorkerHeartbeatTimeout: /readyz answers 503 when no worker has sent
	// a heartbeat within it. Default 30s.
	WorkerHeartbeatTimeout time.Duration
	// DB is the ledger: a SQLite file, or a PostgreSQL URL
	// (postgres://… or postgresql://…) that several API replicas share.
	// Default /var/lib/renderbox/api/ledger.db. Env RENDERBOX_DB. A -db
	// flag holding a password is refused: pass such a URL in RENDERBOX_DB
	// or DBFile, or the password in PGPASSWORD or ~/.pgpass.
	DB string
	// DBFile names a file whose first line is DB, for a URL with
	// credentials (0600, the API's user's). Default none. Env
	// RENDERBOX_DB_FILE.
	DBFile string
	// Retention is how long inputs, outputs and finished jobs' queue
	// records (completed and archived tasks) are kept. Default 24h.
	Retention time.Duration
	// Limits: request body, queue depth, per-key rate, ?wait= bound.
	Limits api.Limits
	// HTTP: timeouts, minimum transfer rate, requests in flight.
	HTTP api.HTTPLimits
	// Diagnostics accepts the diagnostic renderers (sandbox-probe) from
	// any key. Default false.
	Diagnostics bool
	// Webhooks turns job webhooks on. Default true.
	Webhooks bool
	// WebhookSecretFile holds the master secret of webhook signatures,
	// made on first start. Default webhook.key next to the ledger. Env
	// RENDERBOX_WEBHOOK_SECRET_FILE.
	WebhookSecretFile string
	// WebhookAllow lists non-public ranges webhooks may reach (CIDRs,
	// comma-separated). Default none. Env RENDERBOX_WEBHOOK_ALLOW.
	WebhookAllow string
	// TrustedProxies lists the peers (CIDRs or addresses, comma-separated)
	// whose X-Request-Id header is taken as a request's id, and whose W3C
	// traceparent is followed when tracing (docs/tracing.md); others get
	// an id of the API's own and a trace that starts at the API. Default
	// none. Env RENDERBOX_TRUSTED_PROXIES.
	TrustedProxies string
	// WebhookRetry is the wait before each retry. Default
	// webhook.DefaultSchedule (5s … 12h, about a day in all).
	WebhookRetry string
	// WebhookTimeout bounds one delivery attempt. Default 10s.
	WebhookTimeout time.Duration
	// Remote lets jobs name their input by URL (download_from) and take a
	// url, fetched by the API under the egress policy: fetch.Config, the
	// workers' settings of the same names. Default off.
	Remote fetch.Config
	// RemoteTimeout bounds one job's fetches. Default 60s.
	RemoteTimeout time.Duration
	// Ceilings are the renderers' limits of the operator's own
	// (render.ParseCeilings); "" keeps the catalogue's.
	Ceilings string
	// Deliver is -deliver-buckets: the buckets jobs may deliver to.
	// Presigned URLs follow Remote's egress lists.
	Deliver deliver.Config
	// Blobs is where inputs and outputs live: Redis (default) or an
	// object store by URL, the workers' -blobs (blobs.Config).
	Blobs blobs.Config
	// Events: a result event this replica could not apply is retried, by
	// any replica, after Events.RetryAfter (default 5s) and given up to
	// the dead-letter stream after Events.MaxDeliveries (default 10).
	Events api.EventConfig
}

// bind registers the configuration's flags on fs with their defaults;
// settle then applies their RENDERBOX_* variables (envflag: -metrics-addr
// is RENDERBOX_METRICS_ADDR), the command line winning.
func (c *Config) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&c.PublicURL, "public-url", "", "base URL clients reach the API at (https://render.example.com, a path prefix allowed): Location, output and webhook URLs are absolute under it (default: relative)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", DefaultMetricsAddr, `serve Prometheus /metrics on this address, apart from the API; the default is loopback, so only this host can scrape it ("" disables)`)
	c.Redis.Bind(fs)
	fs.DurationVar(&c.WorkerHeartbeatTimeout, "worker-heartbeat-timeout", 30*time.Second, "/readyz answers 503 when no worker has sent a heartbeat within this (a few of the workers' -heartbeat-interval)")
	c.bindLedger(fs)
	fs.DurationVar(&c.Retention, "retention", 24*time.Hour, "how long inputs, outputs and finished jobs' queue records are kept")
	fs.Int64Var(&c.Limits.MaxBodyBytes, "max-body-bytes", 64<<20, "largest request body (413 past it)")
	fs.IntVar(&c.Limits.MaxQueueDepth, "max-queue-depth", 1000, "most jobs waiting or running (503 past it)")
	fs.Float64Var(&c.Limits.RatePerSecond, "rate", 20, "submissions per second per key (429 past it)")
	fs.IntVar(&c.Limits.Burst, "burst", 40, "submission burst per key")
	fs.DurationVar(&c.Limits.MaxWait, "max-wait", 60*time.Second, "longest ?wait=")
	fs.StringVar(&c.Ceilings, "ceilings", "", render.CeilingsUsage)
	fs.DurationVar(&c.HTTP.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "bound on reading a request's headers")
	fs.DurationVar(&c.HTTP.BodyTimeout, "body-timeout", 30*time.Second, "grace for a request body, beyond its size at -min-rate (408 past it)")
	fs.Int64Var(&c.HTTP.MinRate, "min-rate", 32<<10, "slowest upload and download, bytes/s, after their grace")
	fs.DurationVar(&c.HTTP.WriteTimeout, "write-timeout", 0, "bound on writing a response, from the end of its body; outputs get their size at -min-rate more (default -max-wait + 30s)")
	fs.DurationVar(&c.HTTP.IdleTimeout, "idle-timeout", 60*time.Second, "close keep-alive connections idle this long")
	fs.IntVar(&c.HTTP.MaxInFlight, "max-in-flight", 512, "most requests served at once (429 past it)")
	fs.IntVar(&c.HTTP.MaxInFlightPerKey, "max-in-flight-per-key", 32, "most requests one key has in flight (429 past it)")
	fs.IntVar(&c.Limits.MaxQueuedPerKey, "max-queued-per-key", 250, "most jobs one key may have waiting for a worker (429 key_queue_full past it)")
	fs.Int64Var(&c.Limits.MaxQueuedBytesPerKey, "max-queued-bytes-per-key", 256<<20, "most input bytes one key's waiting jobs may hold (429 key_queue_full past it)")
	fs.Float64Var(&c.Limits.RedisHighWater, "redis-high-water", 0.8, "share of Redis's maxmemory past which new jobs are refused (503 queue_full)")
	fs.BoolVar(&c.Diagnostics, "diagnostics", false, "accept the diagnostic renderers (sandbox-probe: escape attempts run as a job)")
	fs.BoolVar(&c.Webhooks, "webhooks", true, "send webhooks to jobs' callback_url")
	fs.StringVar(&c.WebhookSecretFile, "webhook-secret-file", "", "master secret of webhook signatures (default: webhook.key next to -db; made if missing)")
	fs.StringVar(&c.WebhookAllow, "webhook-allow", "", "non-public ranges webhooks may reach, e.g. 10.0.0.0/8 (public addresses only by default)")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "peers (CIDRs or addresses, comma-separated) whose X-Request-Id is taken as the request's id, and whose traceparent is followed when tracing, e.g. 127.0.0.1 for a proxy on this host (none by default)")
	fs.StringVar(&c.WebhookRetry, "webhook-retry", "", "wait before each webhook retry, e.g. 5s,30s,2m (default 5s,30s,2m,10m,30m,1h,3h,6h,12h)")
	fs.DurationVar(&c.WebhookTimeout, "webhook-timeout", webhook.DefaultTimeout, "bound on one webhook attempt")
	c.Remote.Bind(fs, "download_from")
	c.Blobs.Bind(fs, true /* api */)
	c.Deliver.Bind(fs, false /* worker */)
	fs.DurationVar(&c.RemoteTimeout, "remote-timeout", 60*time.Second, "bound on all of one job's download_from fetches")
	fs.DurationVar(&c.Events.RetryAfter, "event-retry-after", 5*time.Second, "a result event not applied (ledger error, unknown job, a replica that died) is retried by any replica after this")
	fs.Int64Var(&c.Events.MaxDeliveries, "event-max-deliveries", 10, "a result event not applied after this many deliveries is moved to the dead-letter stream renderbox:events:dead")
}

// bindLedger registers the ledger's flags, the only ones api keys takes.
func (c *Config) bindLedger(fs *flag.FlagSet) {
	fs.StringVar(&c.DB, "db", "/var/lib/renderbox/api/ledger.db", "the ledger: a SQLite file or a PostgreSQL URL (postgres://…; a password goes in RENDERBOX_DB or -db-file, not here)")
	fs.StringVar(&c.DBFile, "db-file", "", "read the ledger's -db value (e.g. a PostgreSQL URL with its password) from the first line of this file")
}

// webhooks builds the API's webhook settings from the configuration.
func (c Config) webhooks() (api.Webhooks, error) {
	if !c.Webhooks {
		return api.Webhooks{}, nil
	}
	allow, err := webhook.ParseAllow(c.WebhookAllow)
	if err != nil {
		return api.Webhooks{}, err
	}
	var sched webhook.Schedule
	if c.WebhookRetry != "" {
		if sched, err = webhook.ParseSchedule(c.WebhookRetry); err != nil {
			return api.Webhooks{}, err
		}
	}
	path := c.WebhookSecretFile
	if path == "" {
		if ledger.IsPostgresURL(c.DB) {
			return api.Webhooks{}, errors.New("config: a PostgreSQL ledger has no directory for webhook.key: set -webhook-secret-file (RENDERBOX_WEBHOOK_SECRET_FILE), the same file on every API replica")
		}
		path = filepath.Join(filepath.Dir(c.DB), "webhook.key")
	}
	master, err := webhook.LoadOrCreateMaster(path)
	if err != nil {
		return api.Webhooks{}, err
	}
	p := webhook.Policy{Allow: allow}
	return api.Webhooks{Master: master, Policy: p, Sender: webhook.NewSender(p, nil, c.WebhookTimeout), Schedule: sched}, nil
}

// remote builds the API's download_from settings from the configuration.
func (c Config) remote() (api.RemoteContent, error) {
	if err := c.Remote.Validate(); err != nil {
		return api.RemoteContent{}, fmt.Errorf("config: %w", err)
	}
	if c.RemoteTimeout < time.Second {
		return api.RemoteContent{}, errors.New("config: -remote-timeout must be at least 1s")
	}
	p, _ := c.Remote.Policy()
	return api.RemoteContent{Enabled: c.Remote.Enabled, Policy: p, Timeout: c.RemoteTimeout, MaxPerKey: c.Remote.MaxPerKey, Limits: c.Remote.Limits()}, nil
}

// resolveDB settles DB after fs parsed the command line: -db-file's
// first line when one is named, and never a password that the command
// line carried.
func (c *Config) resolveDB(fs *flag.FlagSet) error {
	dbFlag := false
	fs.Visit(func(f *flag.Flag) { dbFlag = dbFlag || f.Name == "db" })
	if c.DBFile != "" {
		if dbFlag {
			return errors.New("config: -db and -db-file both name the ledger; keep one")
		}
		b, err := os.ReadFile(c.DBFile)
		if err != nil {
			return fmt.Errorf("config: reading the ledger's URL from -db-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if c.DB = strings.TrimSpace(line); c.DB == "" {
			return fmt.Errorf("config: -db-file %s is empty (write the ledger's URL or path on its first line)", c.DBFile)
		}
		return nil
	}
	if dbFlag && ledger.IsPostgresURL(c.DB) && ledger.URLHasPassword(c.DB) {
		return fmt.Errorf("config: -db %s carries a password, which ps shows to every user; pass the URL in RENDERBOX_DB or in a file named by -db-file (RENDERBOX_DB_FILE), or the password in PGPASSWORD or ~/.pgpass", ledger.Redact(c.DB))
	}
	return nil
}

func (c Config) validate() error {
	if c.Limits.MaxBodyBytes < 1024 || c.Limits.MaxQueueDepth < 1 || c.Limits.RatePerSecond <= 0 || c.Limits.Burst < 1 {
		return errors.New("config: -max-body-bytes ≥ 1024, -max-queue-depth ≥ 1, -rate > 0 and -burst ≥ 1 are required")
	}
	if err := c.HTTP.Validate(c.Limits.MaxWait); err != nil {
		return err
	}
	if c.Limits.MaxQueuedPerKey < 1 || c.Limits.MaxQueuedBytesPerKey < 1 {
		return errors.New("config: -max-queued-per-key and -max-queued-bytes-per-key must be at least 1")
	}
	if c.Limits.RedisHighWater <= 0 || c.Limits.RedisHighWater >= 1 {
		return fmt.Errorf("config: -redis-high-water %g must be between 0 and 1 (a share of Redis's maxmemory, e.g. 0.8)", c.Limits.RedisHighWater)
	}
	if c.WorkerHeartbeatTimeout < time.Second || c.WorkerHeartbeatTimeout > queue.WorkerRecordTTL {
		return fmt.Errorf("config: -worker-heartbeat-timeout %s is outside 1s to %s (default 30s)", c.WorkerHeartbeatTimeout, queue.WorkerRecordTTL)
	}
	if c.Events.RetryAfter < 100*time.Millisecond || c.Events.MaxDeliveries < 1 {
		return fmt.Errorf("config: -event-retry-after %s must be at least 100ms and -event-max-deliveries %d at least 1", c.Events.RetryAfter, c.Events.MaxDeliveries)
	}
	if _, err := cidr.Parse(c.TrustedProxies); err != nil {
		return fmt.Errorf("config: -trusted-proxies: %w", err)
	}
	if _, err := api.ParsePublicURL(c.PublicURL); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if _, err := c.remote(); err != nil {
		return err
	}
	if _, err := c.Deliver.Policy(egress.Policy{}); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.Retention < time.Minute {
		return fmt.Errorf("config: -retention %s is under a minute", c.Retention)
	}
	if err := c.Blobs.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cs, err := render.ParseCeilings(c.Ceilings)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	for _, ce := range cs {
		if ce.InputBytes > c.Limits.MaxBodyBytes {
			return fmt.Errorf("config: -ceilings lets %s take %s of input, more than -max-body-bytes %s lets a request carry; raise -max-body-bytes", ce.Renderer, bytesize.String(ce.InputBytes), bytesize.String(c.Limits.MaxBodyBytes))
		}
	}
	return nil
}

// DefaultMetricsAddr is where api serve serves /metrics unless told:
// loopback, apart from the API's own address.
const DefaultMetricsAddr = "127.0.0.1:9090"

const usage = `usage: api [serve] [flags]    serve the API (the default command; "api -addr …" is "api serve -addr …")
       api keys create [-admin] [-create] [-db FILE|URL | -db-file F] NAME
       api keys revoke [-db …] ID
       api keys list [-db …]
       api -version                print the build and exit

Run "api serve -h" or "api keys create -h" for the flags.
`

// Main carries out one command line (without the program's name) and
// returns the exit status: 0, 1 for a command that failed, 2 for a command
// line not understood — which opens nothing. serve runs until ctx ends.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, args, stdout, stderr)
	case "keys":
		err = keys(ctx, args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "api: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "api: %v\n\n%s", err, usage)
		return 2
	case err != nil && cmd == "serve":
		// serve's log is JSON from its first line to its last, the
		// reason it stopped included; a command line it did not
		// understand is the only text (with the usage, above).
		slog.New(slog.NewJSONHandler(stderr, nil)).Error("api serve failed", "err", err.Error())
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "api: %v\n", err)
		return 1
	}
	return 0
}

// usageError is a command line that is not understood: run prints the
// usage with it and exits 2.
type usageError string

func (e usageError) Error() string { return string(e) }

func usagef(format string, a ...any) error { return usageError(fmt.Sprintf(format, a...)) }

// parseError is a flag the command line got wrong as a usage error (exit
// 2, in text, before any log); -h stays flag.ErrHelp.
func parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError(err.Error())
}

// serveFlags is api serve's command line: the configuration's flags and
// -version, which is no setting (envflag gives it no variable).
func serveFlags(c *Config) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("api serve", flag.ContinueOnError)
	c.bind(fs)
	return fs, fs.Bool("version", false, "print the build (version, VCS revision, Go release) and exit")
}

// settle applies the variables of the flags the command line (parsed into
// fs) did not give, then the ledger's URL (resolveDB).
func (c *Config) settle(fs *flag.FlagSet) error {
	if _, err := envflag.Apply(fs, nil, notSettings...); err != nil {
		return err
	}
	return c.resolveDB(fs)
}

// serve runs the API until ctx ends, its log JSON on stderr; a clean stop
// is logged from its start ("api stopping") to its end ("api stopped",
// once requests have finished and the ledger is closed).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	var c Config
	fs, version := serveFlags(&c)
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if *version {
		buildinfo.Read().Print(stdout, "api")
		return nil
	}
	if fs.NArg() > 0 {
		return usagef("api serve takes no arguments, got %q", fs.Arg(0))
	}
	if err := c.settle(fs); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	ropts, redisShown, err := c.Redis.Options()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	// Deferred first, so it runs last: after the ledger and Redis close.
	defer func() {
		if err == nil {
			log.Info("api stopped")
		}
	}()
	// serve's log is JSON from its first line to its last: the standard
	// library's (net/http's) and go-redis's messages too.
	slog.SetDefault(log)
	queue.LogRedisTo(log)
	traces, err := tracing.Setup(ctx, os.Getenv, "renderbox-api", buildinfo.Read().Version, log)
	if err != nil {
		return err
	}
	// Deferred before the server's stop, so it runs after it: the last
	// requests' and webhooks' spans are flushed.
	defer traces.Close(log)
	store, err := ledger.OpenStore(ctx, c.DB)
	if err != nil {
		return fmt.Errorf("opening the ledger: %w", err)
	}
	defer store.Close()
	// While Redis is away a request should hear 503 quickly rather than
	// sit through go-redis's default five dial retries per command.
	ropts.DialTimeout, ropts.DialerRetries = 2*time.Second, 1
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	// A Redis that is down is waited for (503 meanwhile); one that refuses
	// the password or whose certificate does not verify will not change
	// its mind: refuse to start.
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if err := queue.CheckRedis(pctx, rdb, redisShown); errors.Is(err, queue.ErrRedisConfig) {
		return fmt.Errorf("refusing to start: %w", err)
	} else if err != nil {
		log.Warn("redis does not answer yet; /readyz answers 503 until it does", "err", err)
	}
	hooks, err := c.webhooks()
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	proxies, _ := cidr.Parse(c.TrustedProxies)     // checked by validate
	public, _ := api.ParsePublicURL(c.PublicURL)   // checked by validate
	remote, _ := c.remote()                        // checked by validate
	delivery, _ := c.Deliver.Policy(remote.Policy) // checked by validate
	// The catalogue with the operator's ceilings, and the contract
	// served with them (its renderers' limits are generated from it).
	spec := renderbox.OpenAPI
	if c.Ceilings != "" {
		if err := render.ApplyCeilings(c.Ceilings); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if spec, err = contract.RendererSchemas(spec, render.All()); err != nil {
			return fmt.Errorf("the contract with -ceilings: %w", err)
		}
		log.Info("renderer ceilings set", "ceilings", c.Ceilings)
	}
	q := queue.New(rdb, c.Retention)
	if err := c.useBlobs(ctx, log, q); err != nil {
		return err
	}
	s := &api.Server{OpenAPI: spec, Ledger: store, Queue: q, BlobDownloads: api.BlobDownloads{Mode: c.Blobs.Downloads, Expiry: c.Blobs.PresignExpiry}, Logger: log, Limits: c.Limits, HTTP: c.HTTP, Webhooks: hooks, Remote: remote, Deliver: delivery, Diagnostics: c.Diagnostics,
		WorkerHeartbeatTimeout: c.WorkerHeartbeatTimeout, Events: c.Events, TrustedProxies: proxies, PublicURL: public}
	if traces.On() {
		s.Traces = traces
		log.Info("tracing on: spans go to the OTLP/HTTP endpoint of the OTEL_* variables")
	}
	srv := s.HTTPServer(c.Addr)
	var msrv *http.Server
	if c.MetricsAddr != "" {
		msrv = &http.Server{Addr: c.MetricsAddr, Handler: s.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	}
	// ctx is replaced here, before any goroutine reads it: a closure
	// started earlier would race with the assignment and could read half
	// of the old interface and half of the new (a panic in
	// cancelCtx.Done, seen once in CI).
	ctx, cancel := context.WithCancel(ctx)
	hooksDone := make(chan struct{})
	// Attempts in flight end with ctx; wait for them to be recorded
	// before the ledger closes.
	defer func() { cancel(); <-hooksDone }()
	go func() {
		if err := s.RunEvents(ctx); err != nil {
			log.Error("applying events", "err", err)
		}
	}()
	go func() {
		if err := s.RunQueue(ctx); err != nil {
			log.Error("dispatching jobs", "err", err)
		}
	}()
	go func() {
		defer close(hooksDone)
		if err := s.RunWebhooks(ctx); err != nil {
			log.Error("delivering webhooks", "err", err)
		}
	}()
	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		<-ctx.Done()
		log.Info("api stopping: no new requests; finishing those in flight", "timeout_seconds", shutdownTimeout.Seconds())
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("requests still in flight at the shutdown timeout were cut off", "err", err)
		}
		if msrv != nil {
			_ = msrv.Shutdown(sctx)
		}
	}()
	// Bind both before saying so: the log names the addresses bound (a
	// port of 0 becomes the one the kernel chose), and a taken address
	// ends the process before anything is served.
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	maddr := ""
	errc := make(chan error, 2)
	if msrv != nil {
		mln, err := net.Listen("tcp", c.MetricsAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("-metrics-addr: %w", err)
		}
		maddr = mln.Addr().String()
		go func() { errc <- msrv.Serve(mln) }()
	}
	go func() { errc <- srv.Serve(ln) }()
	log.Info("api listening", "addr", ln.Addr().String(), "metrics_addr", maddr, "redis", redisShown, "db", ledger.Redact(c.DB), "public_url", public, "version", buildinfo.Read().Version)
	// Either listener failing (its address taken) ends the process; a
	// shutdown ends both with ErrServerClosed.
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		cancel()
		return err
	}
	// Serve returns as Shutdown begins; the requests in flight end here.
	<-shutdownDone
	return nil
}

// shutdownTimeout is how long requests in flight may finish once serve's
// context ends.
const shutdownTimeout = 10 * time.Second

// useBlobs points q at the object store -blobs names, if any, and sets
// the store's lifecycle rule for the retention where it has rules (the
// janitor deletes on time either way: api.RunQueue). A store that does
// not answer yet is logged, as Redis is: jobs answer 503 until it does.
func (c *Config) useBlobs(ctx context.Context, log *slog.Logger, q *queue.Queue) error {
	st, err := c.Blobs.Store()
	if err != nil || st == nil {
		return err
	}
	q.UseBlobs(st)
	log.Info("documents live in an object store", "store", st.String(), "downloads", c.Blobs.Downloads)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := st.Ping(pctx); err != nil {
		log.Warn("the object store does not answer yet; submissions answer 503 until it does", "err", err)
		return nil
	}
	if err := st.ExpireAfter(pctx, c.Retention); err != nil {
		log.Warn("no lifecycle rule on the object store; the janitor alone deletes objects past the retention", "err", err)
	}
	return nil
}
