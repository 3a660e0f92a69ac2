// Package api is renderbox's HTTP layer (chi). It validates and
// authenticates requests, stores inputs, enqueues jobs, applies the
// workers' result events to the ledger and answers status, output, cancel
// and list calls. It never renders and never runs runsc.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/renderbox/renderbox/internal/buildinfo"
	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/fetch"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
)

// Limits bound what the API accepts.
type Limits struct {
	// MaxBodyBytes bounds a request body (413 past it). Default 64 MiB.
	MaxBodyBytes int64
	// MaxQueueDepth bounds waiting+running jobs (503 past it). Default 1000.
	MaxQueueDepth int
	// RatePerSecond and Burst bound each key's submissions (429 past them).
	// Defaults 20/s and 40.
	RatePerSecond float64
	Burst         int
	// MaxWait bounds ?wait=. Default 60s.
	MaxWait time.Duration
	// MaxRetry is how often a job is retried after a sandbox failure.
	// Default 2.
	MaxRetry int
	// MaxQueuedPerKey bounds one key's jobs waiting for a worker (429
	// key_queue_full past it), so one key cannot fill the queue. Default
	// 250.
	MaxQueuedPerKey int
	// MaxQueuedBytesPerKey bounds the input bytes of one key's waiting
	// jobs (429 key_queue_full past it). Default 256 MiB.
	MaxQueuedBytesPerKey int64
	// RedisHighWater is the share of Redis's maxmemory past which new jobs
	// are refused (503 queue_full), so Redis never reaches it and refuses
	// the writes that finish accepted jobs. Default 0.8; Redis without a
	// maxmemory is not checked.
	RedisHighWater float64
}

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = 64 << 20
	}
	if l.MaxQueueDepth == 0 {
		l.MaxQueueDepth = 1000
	}
	if l.RatePerSecond == 0 {
		l.RatePerSecond = 20
	}
	if l.Burst == 0 {
		l.Burst = 40
	}
	if l.MaxWait == 0 {
		l.MaxWait = 60 * time.Second
	}
	if l.MaxRetry == 0 {
		l.MaxRetry = 2
	}
	if l.MaxQueuedPerKey == 0 {
		l.MaxQueuedPerKey = 250
	}
	if l.MaxQueuedBytesPerKey == 0 {
		l.MaxQueuedBytesPerKey = 256 << 20
	}
	if l.RedisHighWater == 0 {
		l.RedisHighWater = 0.8
	}
	return l
}

// Server is the HTTP API.
type Server struct {
	OpenAPI []byte
	Ledger  ledger.Store
	Queue   *queue.Queue
	// BlobDownloads says how outputs in an object store are downloaded.
	BlobDownloads BlobDownloads
	Logger        *slog.Logger
	Limits        Limits
	// Diagnostics lets clients run the operators' diagnostic renderers
	// (sandbox-probe). Off by default.
	Diagnostics bool
	// Webhooks configures job webhooks; the zero value refuses
	// callback_url.
	Webhooks Webhooks
	// Remote configures download_from; the zero value refuses it.
	Remote RemoteContent
	// Deliver decides where a job's outputs may be delivered (the deliver
	// field); the zero value allows presigned URLs on public addresses
	// and no bucket.
	Deliver deliver.Policy
	// Registry receives the API's metrics; nil means a private one. They
	// are served by MetricsHandler, not by Handler.
	Registry *prometheus.Registry
	// HTTP bounds connections, bodies and requests in flight.
	HTTP HTTPLimits
	// WorkerHeartbeatTimeout: a worker whose last heartbeat is older is
	// not alive, and with none alive /readyz answers 503. Default 30s.
	WorkerHeartbeatTimeout time.Duration
	// Events: how result events this replica could not apply are retried.
	Events EventConfig
	// TrustedProxies are the peers whose X-Request-Id is taken as the
	// request's id (a proxy in front of the API); from any other peer the
	// header is replaced by an id of the API's own. Default none.
	TrustedProxies []netip.Prefix
	// Traces receives the API's spans (internal/tracing); nil traces
	// nothing, and a traceparent header is then ignored from anyone.
	Traces trace.TracerProvider
	// PublicURL is the base URL clients reach the API at (checked by
	// ParsePublicURL: no trailing slash). Location, output URLs and the
	// URLs in webhooks are absolute under it; "" keeps them relative —
	// never built from the request's Host, which the client writes.
	PublicURL string
	// Build is what GET /version and renderbox_build_info report; the zero
	// value means the running binary's own (buildinfo.Read).
	Build buildinfo.Info
	// LostAfter is how old a job still unfinished must be before the
	// reconciler asks the queue whether it lost it (reconcile.go).
	// Default 2 minutes.
	LostAfter time.Duration

	waiters      *waiters
	waitPoll     time.Duration // ?wait= re-reads the ledger this often
	limiters     *limiters
	metrics      *metrics
	inFlight     *inFlight
	webhookWake  chan struct{}
	dispatchWake chan struct{}
	memory       *memoryGuard
	fetcher      *fetch.Fetcher
	fetching     *fetch.KeySlots
	once         sync.Once
}

// setup fills defaults and makes the server's state, once.
func (s *Server) setup() { s.once.Do(s.init) }

func (s *Server) init() {
	s.Limits = s.Limits.withDefaults()
	s.HTTP = s.HTTP.withDefaults(s.Limits.MaxWait)
	if s.WorkerHeartbeatTimeout == 0 {
		s.WorkerHeartbeatTimeout = 30 * time.Second
	}
	if s.LostAfter <= 0 {
		s.LostAfter = defaultLostAfter
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Registry == nil {
		s.Registry = prometheus.NewRegistry()
	}
	if s.Webhooks.enabled() {
		s.Webhooks = s.Webhooks.withDefaults()
	}
	s.webhookWake = make(chan struct{}, 1)
	s.dispatchWake = make(chan struct{}, 1)
	s.memory = &memoryGuard{q: s.Queue, highWater: s.Limits.RedisHighWater}
	s.waiters = newWaiters()
	if s.waitPoll == 0 {
		s.waitPoll = time.Second
	}
	s.limiters = newLimiters(s.Limits.RatePerSecond, s.Limits.Burst)
	if s.Build == (buildinfo.Info{}) {
		s.Build = buildinfo.Read()
	}
	s.metrics = newMetrics(s.Registry, s.Queue, s.Ledger, s.WorkerHeartbeatTimeout)
	s.Registry.MustRegister(s.Build.Collector())
	s.inFlight = newInFlight(s.HTTP)
	if s.Remote.Enabled {
		if s.Remote.Timeout <= 0 {
			s.Remote.Timeout = 60 * time.Second
		}
		if s.Remote.MaxPerKey <= 0 {
			s.Remote.MaxPerKey = 4
		}
		s.fetching = fetch.NewKeySlots(s.Remote.MaxPerKey)
		s.fetcher = fetch.New(&egress.Dialer{Policy: s.Remote.Policy, Resolver: s.Remote.Resolver}, s.Remote.Limits, s.metrics.fetches)
	}
}

// Handler returns the routes. /metrics is not among them: see
// MetricsHandler.
func (s *Server) Handler() http.Handler {
	s.setup()
	r := chi.NewRouter()
	r.Use(s.paceBody, s.requestID, s.traceRequest, s.accessLog, middleware.Recoverer, s.metrics.middleware, s.limitInFlight)
	// Each route names the query parameters it takes; any other is
	// refused (see onlyQuery).
	bare := r.With(onlyQuery())
	getHead(bare, "/healthz", s.healthz)
	getHead(bare, "/readyz", s.readyz)
	getHead(bare, "/version", s.version)
	getHead(bare, "/openapi.yaml", s.openapi)
	getHead(bare, "/v1/renderers", s.renderers)
	getHead(bare, "/v1/fonts", s.fonts)
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate, s.limitKeyInFlight)
		r.With(onlyQuery("wait")).Post("/v1/jobs", s.createJob)
		getHead(r.With(onlyQuery("state", "cursor", "limit")), "/v1/jobs", s.listJobs)
		getHead(r.With(onlyQuery("wait")), "/v1/jobs/{id}", s.getJob)
		bare := r.With(onlyQuery())
		bare.Delete("/v1/jobs/{id}", s.cancelJob)
		getHead(bare, "/v1/jobs/{id}/outputs/{name}", s.getOutput)
		getHead(bare, "/v1/jobs/{id}/outputs.zip", s.getOutputsZip)
		getHead(bare, "/v1/webhook-secret", s.webhookSecret)
		getHead(bare.With(requireAdmin), "/v1/workers", s.listWorkers)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 must list the methods the resource has.
		w.Header().Set("Allow", strings.Join(allowed(r, req), ", "))
		// A made-up method is not quoted back: it can be near a megabyte.
		problem(w, http.StatusMethodNotAllowed, "method_not_allowed", methodLabel(req.Method)+" is not allowed on "+req.URL.Path)
	})
	return r
}

// onlyQuery refuses a request whose query holds a parameter other than
// names, or one of them twice: an unknown parameter is most often a typo
// (?limt=5, ?wiat=30) that, dropped in silence, gives the client an answer
// it did not ask for. Unknown form fields are refused alike (intake.go).
func onlyQuery(names ...string) func(http.Handler) http.Handler {
	takes := "none"
	if len(names) > 0 {
		takes = strings.Join(names, ", ")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q, err := url.ParseQuery(r.URL.RawQuery)
			if err != nil {
				problem(w, http.StatusBadRequest, "invalid_request", "the query string is malformed: "+err.Error())
				return
			}
			for _, name := range slices.Sorted(maps.Keys(q)) {
				if !slices.Contains(names, name) {
					problem(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("unknown query parameter %s (this route takes: %s)", quoteBounded(name), takes))
					return
				}
				if n := len(q[name]); n > 1 {
					problem(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("query parameter %s is given %d times; give it once", name, n))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// getHead routes GET and HEAD for pattern to h. net/http drops the body
// of a HEAD answer and keeps its headers (with Content-Length when the
// body was small enough to count), so one handler serves both; a client
// can ask whether a job or an output is there without taking the body.
func getHead(r chi.Router, pattern string, h http.HandlerFunc) {
	r.Get(pattern, h)
	r.Head(pattern, h)
}

// allowed lists the methods router has a route for at req's path, for a
// 405's Allow header. chi knows them while routing but hands a custom 405
// handler none, so each is looked up again.
func allowed(router *chi.Mux, req *http.Request) []string {
	path := req.URL.RawPath
	if path == "" {
		path = req.URL.Path
	}
	var ms []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if router.Match(chi.NewRouteContext(), m, path) {
			ms = append(ms, m)
		}
	}
	return ms
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// blobStore is the object store documents live in, if not Redis.
func (s *Server) blobStore() (interface{ Ping(context.Context) error }, bool) {
	if s.Queue == nil {
		return nil, false
	}
	p, ok := s.Queue.Blobs.(interface{ Ping(context.Context) error })
	return p, ok
}

// readyz answers 200 only when Redis and the ledger both answer (and the
// object store, with -blobs s3://…) and at
// least one worker has sent a heartbeat within WorkerHeartbeatTimeout:
// without a worker, accepted jobs would only queue. Each failing check
// adds a reason.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"redis": "ok", "ledger": "ok", "workers": "ok"}
	var reasons []string
	if s.Queue == nil || s.Queue.Ping(ctx) != nil {
		checks["redis"] = "unavailable"
		reasons = append(reasons, "redis does not answer")
	}
	if s.Ledger == nil || s.Ledger.Ping(ctx) != nil {
		checks["ledger"] = "unavailable"
		reasons = append(reasons, "the ledger does not answer")
	}
	if p, ok := s.blobStore(); ok {
		checks["blobs"] = "ok"
		if p.Ping(ctx) != nil {
			checks["blobs"] = "unavailable"
			reasons = append(reasons, "the object store (-blobs) does not answer")
		}
	}
	if checks["redis"] != "ok" {
		checks["workers"] = "unknown"
	} else if n, err := s.Queue.WorkersAlive(ctx, s.WorkerHeartbeatTimeout); err != nil {
		checks["workers"] = "unknown"
		reasons = append(reasons, "reading the workers' heartbeats failed")
	} else if n == 0 {
		checks["workers"] = "none"
		reasons = append(reasons, fmt.Sprintf("no worker has sent a heartbeat in the last %s (start one: worker serve)", s.WorkerHeartbeatTimeout))
	}
	body := map[string]any{"status": "ok", "checks": checks}
	status := http.StatusOK
	if len(reasons) > 0 {
		status = http.StatusServiceUnavailable
		body["status"], body["reason"] = "unavailable", strings.Join(reasons, "; ")
		w.Header().Set("Retry-After", "5")
	}
	writeJSON(w, status, body)
}

// version answers which build is serving, without a key: it tells an
// operator or a client which release answered, and a version is no secret
// the binaries' -version does not already print.
func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Build)
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(s.OpenAPI)))
	_, _ = w.Write(s.OpenAPI)
}

type rendererLimits struct {
	TimeoutSeconds float64 `json:"timeout_seconds"`
	MemoryBytes    int64   `json:"memory_bytes"`
	CPUs           float64 `json:"cpus"`
	MaxOutputBytes int64   `json:"max_output_bytes"`
	MaxOutputFiles int     `json:"max_output_files"`
}

type rendererJSON struct {
	*render.Renderer
	Options []render.Option `json:"options"` // [] rather than null
	Limits  rendererLimits  `json:"limits"`
}

func (s *Server) renderers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Catalogue())
}

// Catalogue is the body of GET /v1/renderers (also what the client's and
// the CLI's unit tests are answered, internal/apifake).
func Catalogue() any {
	var list []rendererJSON
	for _, r := range render.All() {
		l := r.Limits
		list = append(list, rendererJSON{Renderer: r, Options: append([]render.Option{}, r.Options...), Limits: rendererLimits{
			TimeoutSeconds: l.Timeout.Seconds(), MemoryBytes: l.MemoryBytes, CPUs: l.CPUs,
			MaxOutputBytes: l.MaxOutputBytes, MaxOutputFiles: l.MaxOutputFiles,
		}})
	}
	return map[string]any{"renderers": list}
}

// writeJSON answers v as JSON with its Content-Length: encoded whole
// first, so a HEAD answer (whose body net/http drops) still says how
// large GET's would be — net/http counts it only for bodies under 2 KiB.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
