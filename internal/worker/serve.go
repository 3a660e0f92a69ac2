package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/blobs"
	"github.com/renderbox/renderbox/internal/buildinfo"
	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/fetch"
	"github.com/renderbox/renderbox/internal/hostcheck"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/tracing"
)

// ServeConfig are the flags of `worker serve` beyond Config.
type ServeConfig struct {
	// Redis is how to reach the queue's Redis (address, credentials, TLS;
	// see queue.RedisConfig).
	Redis queue.RedisConfig
	// Concurrency is how many sandboxes run at once. Default 2.
	Concurrency int
	// ShutdownTimeout is how long SIGTERM waits for running jobs before
	// requeueing them. Default 30s.
	ShutdownTimeout time.Duration
	// MetricsAddr serves /metrics; "" disables. Default 127.0.0.1:9091.
	MetricsAddr string
	// Name identifies this worker in events and logs. Default: hostname.
	Name string
	// HeartbeatInterval is how often the worker tells Redis it is alive
	// (the API's /readyz and GET /v1/workers read it). Default 5s.
	HeartbeatInterval time.Duration
	// PollInterval is how long asynq sleeps (between a half and one and
	// a half of this) after an idle worker's dequeue found nothing and
	// its wait for a wake (up to a second, queue.Waker) ran out. A job the
	// dispatcher queues wakes the worker at once; a task queued without a
	// wake (a retry coming due) starts within about a second and this.
	// docs/settings.md has what it costs idle. Default 25ms.
	PollInterval time.Duration
	// Pool configures the pre-booted sandboxes.
	Pool PoolConfig
	// Remote turns on the broker of URL pages.
	Remote fetch.Config
	// Blobs is where inputs and outputs live: the API's -blobs.
	Blobs blobs.Config
	// Deliver is where jobs' outputs may be uploaded besides (-deliver-*);
	// URLs follow Remote's egress lists.
	Deliver deliver.Config
	// Ceilings are the renderers' limits of the operator's own
	// (render.ParseCeilings), the API's.
	Ceilings string
	// UnsafeNativeBench runs every job natively, WITHOUT gVisor: the same
	// agent, renderers, pool and job path, as a benchmark floor
	// (sandbox.Manager.UseUnsafeNative). Never for untrusted input
	// (docs/security.md). Only the command line sets it: it has no
	// variable, and `worker serve` refuses one. Default false.
	UnsafeNativeBench bool
}

// UnsafeNativeFlag is the flag that turns on UnsafeNativeBench.
const UnsafeNativeFlag = "unsafe-native-bench"

// DefaultMetricsAddr is where a worker serves /metrics unless told:
// loopback, beside the API's 127.0.0.1:9090.
const DefaultMetricsAddr = "127.0.0.1:9091"

// Bind registers serve's flags beyond Config's.
func (s *ServeConfig) Bind(fs *flag.FlagSet) {
	s.Redis.Bind(fs)
	fs.IntVar(&s.Concurrency, "concurrency", 2, "sandboxes at once")
	fs.DurationVar(&s.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long running jobs may finish before they are requeued")
	fs.StringVar(&s.MetricsAddr, "metrics-addr", DefaultMetricsAddr, `serve Prometheus /metrics on this address; the default is loopback, so only this host can scrape it ("" disables; RENDERBOX_WORKER_METRICS is a deprecated name of its variable)`)
	fs.StringVar(&s.Name, "name", "", "worker name (default: hostname)")
	fs.DurationVar(&s.HeartbeatInterval, "heartbeat-interval", 5*time.Second, "how often to tell Redis this worker is alive (the API's -worker-heartbeat-timeout must be a few of these)")
	fs.DurationVar(&s.PollInterval, "poll-interval", 25*time.Millisecond, "how long an idle worker sleeps after its wait for a wake (up to 1s) ran out before it asks Redis for a job again: a job the API queues wakes it at once, a retry coming due waits up to about 1s and this")
	s.Pool.Bind(fs)
	s.Remote.Bind(fs, "a URL page")
	s.Blobs.Bind(fs, false /* api */)
	s.Deliver.Bind(fs, true /* worker */)
	fs.StringVar(&s.Ceilings, "ceilings", "", render.CeilingsUsage)
	fs.BoolVar(&s.UnsafeNativeBench, UnsafeNativeFlag, false, "UNSAFE, benchmarks only: run jobs as native processes WITHOUT gVisor (make bench's native-warm floor); never for untrusted input")
}

// Serve runs the start-up checks, then takes jobs from the queue until
// ctx ends (SIGTERM/SIGINT), when it stops taking jobs and lets running
// ones finish (or requeues them after ShutdownTimeout). It never leaves a
// sandbox behind: running sandboxes are killed when their context ends,
// and the reaper runs once more on the way out.
func Serve(ctx context.Context, c Config, s ServeConfig) error {
	if s.Concurrency < 1 {
		return fmt.Errorf("serve: -concurrency must be at least 1, got %d", s.Concurrency)
	}
	if s.HeartbeatInterval < 100*time.Millisecond || s.HeartbeatInterval > time.Minute {
		return fmt.Errorf("serve: -heartbeat-interval %s is outside 100ms to 1m (default 5s)", s.HeartbeatInterval)
	}
	if s.PollInterval < 5*time.Millisecond || s.PollInterval > 5*time.Second {
		return fmt.Errorf("serve: -poll-interval %s is outside 5ms to 5s (default 25ms)", s.PollInterval)
	}
	// Before anything reads the catalogue: the pool's families too.
	if err := render.ApplyCeilings(s.Ceilings); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	host, _ := os.Hostname()
	if s.Name == "" {
		s.Name = host
	}
	ropts, redisShown, err := s.Redis.Options()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fams, err := s.Pool.families()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log := c.Logger().With("worker", s.Name)
	// serve's log is JSON from its first line to its last: the standard
	// library's (net/http's) and go-redis's messages too.
	slog.SetDefault(log)
	queue.LogRedisTo(log)
	c.WarnDeprecated(log)
	traces, err := tracing.Setup(ctx, os.Getenv, "renderbox-worker", buildinfo.Read().Version, log)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: the spans of jobs that finished
	// while draining are flushed.
	defer traces.Close(log)
	// The checks (and the state dir's lock) before Redis is dialed: a
	// second worker on a state dir refuses without touching the queue.
	hc := c.Host(log)
	hc.Native = s.UnsafeNativeBench
	m, facts, err := hostcheck.Preflight(ctx, hc, hostcheck.Log(log), fams != nil, true /* serving */)
	if err != nil {
		return err
	}
	if s.UnsafeNativeBench {
		// After the checks: the host is still checked with real sandboxes.
		m.UseUnsafeNative()
		log.Warn("UNSAFE: -" + UnsafeNativeFlag + ": this worker renders WITHOUT gVisor, natively on the host kernel; a benchmark floor, never for untrusted input")
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := queue.CheckRedis(pctx, rdb, redisShown); err != nil {
		if errors.Is(err, queue.ErrRedisConfig) {
			return fmt.Errorf("refusing to start: %w", err)
		}
		return fmt.Errorf("refusing to start: %w (start it with: make redis)", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := NewMetrics(reg)
	RegisterRootfs(reg, facts.Rootfs)
	reg.MustRegister(buildinfo.Read().Collector())
	fetcher, err := s.Remote.Fetcher(reg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	egressPolicy, err := s.Remote.Policy()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	uploader, err := s.Deliver.Uploader(egressPolicy)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	q := queue.New(rdb, 0)
	if st, err := s.Blobs.Store(); err != nil {
		return fmt.Errorf("serve: %w", err)
	} else if st != nil {
		if err := st.Ping(pctx); err != nil {
			return fmt.Errorf("refusing to start: %w", err)
		}
		q.UseBlobs(st)
		log.Info("documents live in an object store", "store", st.String())
	}
	h := &Handler{Manager: m, Queue: q, Logger: log, Name: s.Name, RootfsDigest: facts.Rootfs, Metrics: metrics, Fetcher: fetcher, Deliver: uploader}
	if traces.On() {
		h.Traces = traces
		log.Info("tracing on: spans go to the OTLP/HTTP endpoint of the OTEL_* variables")
	}
	closePool, err := startPool(ctx, h, fams, reg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if s.MetricsAddr != "" {
		stop, err := serveMetrics(s.MetricsAddr, reg, log)
		if err != nil {
			return err
		}
		defer stop()
	}

	// Every job's context derives from base; it ends just before asynq
	// gives up on running jobs at shutdown, so their sandboxes are killed
	// and the jobs requeued rather than orphaned.
	base, stopJobs := context.WithCancel(context.Background())
	defer stopJobs()
	// An idle worker's dequeue waits for the dispatcher's wake (up to a
	// second) rather than polling: see queue.Waker. Stopped at the drain,
	// so that asynq's shutdown does not wait for a held dequeue.
	wakeCtx, stopWake := context.WithCancel(context.Background())
	defer stopWake()
	rdb.AddHook(q.ListenWake(wakeCtx, time.Second))
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		BaseContext:     func() context.Context { return base },
		IsFailure:       IsFailure,
		Concurrency:     s.Concurrency,
		Queues:          map[string]int{queue.QueueName: 1},
		ShutdownTimeout: s.ShutdownTimeout,
		// After a wait for a wake that timed out, ask again within a poll
		// rather than asynq's default second.
		TaskCheckInterval: s.PollInterval,
		RetryDelayFunc: func(n int, _ error, _ *asynq.Task) time.Duration {
			return time.Duration(math.Min(30, math.Pow(2, float64(n)))) * time.Second
		},
		Logger:   asynqLogger{l: log, h: h},
		LogLevel: asynq.WarnLevel,
	})
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go h.WatchCancels(wctx)
	mux := asynq.NewServeMux()
	mux.Handle(queue.TypeRender, h)
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("starting the queue consumer: %w", err)
	}
	info := queue.WorkerInfo{ID: workerID(), Name: s.Name, Host: host, RootfsDigest: facts.Rootfs,
		RunscVersion: facts.Runsc, Concurrency: s.Concurrency, PoolFamilies: familyNames(fams), StartedAt: time.Now().UTC(),
		UnsafeNativeBench: s.UnsafeNativeBench}
	hctx, stopBeats := context.WithCancel(context.Background())
	beatsDone := make(chan struct{})
	go func() {
		defer close(beatsDone)
		Heartbeat(hctx, h.Queue, info, s.HeartbeatInterval, log)
	}()
	go publishFonts(hctx, h.Queue, m.Config().Rootfs, facts.Rootfs, log)
	// On every way out, not only a drain: a worker that fails after this
	// point is not alive either.
	defer func() { stopBeats(); <-beatsDone }()
	log.Info("worker ready", "concurrency", s.Concurrency, "redis", redisShown, "worker_id", info.ID,
		"rootfs_digest", info.RootfsDigest, "runsc_version", info.RunscVersion, "version", buildinfo.Read().Version,
		"cgroup_parent", m.Config().CgroupParent, "unsafe_native_bench", s.UnsafeNativeBench)
	<-ctx.Done()
	stopWake()
	// A draining worker takes no new jobs: it is no longer counted alive.
	stopBeats()
	<-beatsDone
	log.Info("draining: no new jobs; waiting for running ones", "timeout_seconds", s.ShutdownTimeout.Seconds())
	grace := time.AfterFunc(max(0, s.ShutdownTimeout-500*time.Millisecond), stopJobs)
	defer grace.Stop()
	srv.Shutdown()
	h.GiveBack()
	closePool()
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	if n, err := m.Reap(rctx); err != nil || n > 0 {
		log.Warn("reaped sandboxes on the way out", "count", n, "err", err)
	}
	log.Info("worker stopped")
	return nil
}

// startPool starts the pool of fams (none: nil) for h, its gauges in reg,
// and returns what closes it, bounded, on the way out.
func startPool(ctx context.Context, h *Handler, fams []sandbox.PoolFamily, reg *prometheus.Registry) (func(), error) {
	if fams == nil {
		return func() {}, nil
	}
	pool, err := h.Manager.NewPool(sandbox.PoolConfig{Families: fams, OnEvent: h.Metrics.PoolEvent})
	if err != nil {
		return nil, err
	}
	RegisterPool(reg, pool)
	pool.Start(ctx)
	h.Pool = pool
	return func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pool.Close(cctx); err != nil {
			h.Logger.Warn("closing the pool", "err", err)
		}
	}, nil
}

// serveMetrics serves reg's /metrics on addr until stop. The address is
// bound here: a taken one is an operator's mistake to hear about at once,
// not a log line while jobs run unwatched.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	mln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	log.Info("metrics listening", "addr", mln.Addr().String())
	go func() {
		if err := msrv.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return func() { msrv.Close() }, nil
}

// workerID names this worker process in its heartbeat: two workers on one
// host (or a restarted one) never share a record.
func workerID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "wrk_" + hex.EncodeToString(b)
}

func familyNames(fams []sandbox.PoolFamily) []string {
	names := []string{}
	for _, f := range fams {
		if f.Size > 0 {
			names = append(names, f.Name)
		}
	}
	return names
}

// asynqLogger sends asynq's logs to the worker's slog logger.
type asynqLogger struct {
	l *slog.Logger
	h *Handler // nil: every line is passed on
}

// retryExhausted starts the line asynq logs when it archives a task that
// returned asynq.SkipRetry (asynq's processor.handleFailedMessage).
const retryExhausted = "Retry exhausted for task id="

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }

// Warn passes asynq's warnings on but "Retry exhausted" for a task whose
// job the handler ended (failed or canceled, not to be retried): its end
// is logged as "job finished" with its state and error code, and nothing
// was retried. One whose retries did run out (its result could not be
// reported) stays a warning.
func (a asynqLogger) Warn(args ...any) {
	msg := fmt.Sprint(args...)
	if task, ok := strings.CutPrefix(msg, retryExhausted); ok && a.h != nil && a.h.takeEnded(task) {
		a.l.Debug("asynq archived the task of an ended job", "task_id", task)
		return
	}
	a.l.Warn(msg)
}
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...)) }
