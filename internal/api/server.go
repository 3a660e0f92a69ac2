package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPLimits bound what one connection, one request and one key can hold
// of the server: time, and requests in flight. Without them an idle
// keep-alive connection or a body sent a byte every ten seconds is held
// forever, and one client's slow requests can take every goroutine.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// BodyTimeout is the grace for reading a request body: a body must
	// have arrived within BodyTimeout plus its size at MinRate, so a large
	// upload at a fair rate gets through and a trickle is cut off (408).
	// Default 30s.
	BodyTimeout time.Duration
	// MinRate, in bytes per second, is the slowest a body may arrive and an
	// output may be downloaded beyond their grace. Default 32 KiB/s.
	MinRate int64
	// WriteTimeout bounds writing a response, counted from the end of its
	// request body; an output download gets WriteTimeout plus its size at
	// MinRate. It must exceed the longest ?wait=. Default MaxWait + 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for
	// its next request. Default 60s.
	IdleTimeout time.Duration
	// MaxInFlight bounds the requests served at once (429
	// too_many_requests past it); /healthz and /readyz are not counted.
	// Default 512.
	MaxInFlight int
	// MaxInFlightPerKey bounds one API key's requests at once (429
	// too_many_requests past it). Default 32.
	MaxInFlightPerKey int
}

// withDefaults fills unset fields; maxWait is the longest ?wait=.
func (l HTTPLimits) withDefaults(maxWait time.Duration) HTTPLimits {
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = 10 * time.Second
	}
	if l.BodyTimeout == 0 {
		l.BodyTimeout = 30 * time.Second
	}
	if l.MinRate == 0 {
		l.MinRate = 32 << 10
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = maxWait + 30*time.Second
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = 60 * time.Second
	}
	if l.MaxInFlight == 0 {
		l.MaxInFlight = 512
	}
	if l.MaxInFlightPerKey == 0 {
		l.MaxInFlightPerKey = 32
	}
	return l
}

// Validate names the first bad field; maxWait is the longest ?wait=.
func (l HTTPLimits) Validate(maxWait time.Duration) error {
	l = l.withDefaults(maxWait)
	switch {
	case l.ReadHeaderTimeout < 0, l.BodyTimeout < 0, l.IdleTimeout < 0:
		return errors.New("config: -read-header-timeout, -body-timeout and -idle-timeout must be positive")
	case l.MinRate < 1:
		return errors.New("config: -min-rate must be at least 1 byte/s")
	case l.WriteTimeout <= maxWait:
		return fmt.Errorf("config: -write-timeout %s must exceed -max-wait %s, or a ?wait= answer could not be written", l.WriteTimeout, maxWait)
	case l.MaxInFlight < 1, l.MaxInFlightPerKey < 1:
		return errors.New("config: -max-in-flight and -max-in-flight-per-key must be at least 1")
	}
	return nil
}

// HTTPServer returns an http.Server for the API's routes on addr with the
// HTTPLimits' timeouts. There is no server-wide ReadTimeout: it would cut
// off a large upload at any fair rate; bodies get a deadline of their own
// (see paceBody).
func (s *Server) HTTPServer(addr string) *http.Server {
	h := s.Handler()
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: s.HTTP.ReadHeaderTimeout,
		WriteTimeout:      s.HTTP.WriteTimeout,
		IdleTimeout:       s.HTTP.IdleTimeout,
	}
}

// MetricsHandler serves /metrics. It is meant for a listener of its own
// that only the operator reaches: the metrics show every tenant's jobs.
func (s *Server) MetricsHandler() http.Handler {
	s.setup()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
	return mux
}

// bodyState is what paceBody learned about a request's body.
type bodyState struct {
	tooSlow atomic.Bool
	started atomic.Bool // a Read was made: a 100 Continue went out if asked for
	ended   atomic.Bool // the body was read to its end
}

type bodyStateKey struct{}

// bodyTooSlow reports whether r's body was cut off for arriving slower
// than MinRate.
func bodyTooSlow(r *http.Request) bool {
	st, _ := r.Context().Value(&bodyStateKey{}).(*bodyState)
	return st != nil && st.tooSlow.Load()
}

// abandonBody is called before answering a request whose body the
// handler began to read and will not finish. It has net/http treat the
// body as cut off at a limit: the answer is sent, the connection
// half-closed (FIN) and closed only after a grace, so a client still
// sending reads the answer before any reset. Without it, a body behind
// "Expect: 100-continue" refused mid-way ended in a bare close: a reset
// right behind the 413 (net/http lingers by itself only for a body it
// was left to discard). http.MaxBytesReader is the public way to say so;
// it needs net/http's own ResponseWriter, found under the middlewares'
// wrappers. It reads at most abandonSlack bytes more: a body that ends
// within them (a multipart epilogue) keeps its connection. A body never
// read is left alone: reading it now would send the 100 Continue that
// was held back.
func abandonBody(w http.ResponseWriter, r *http.Request) {
	st, _ := r.Context().Value(&bodyStateKey{}).(*bodyState)
	if st == nil || !st.started.Load() || st.ended.Load() {
		return
	}
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, abandonSlack))
}

// abandonSlack is what abandonBody reads of a body's rest.
const abandonSlack = 4 << 10

// paceBody gives a request body a read deadline that moves with what has
// arrived: start + BodyTimeout + bytes read / MinRate. Once the body is
// read, the deadline is lifted (an expired read deadline would cancel the
// request's context during ?wait=) and the response gets WriteTimeout from
// then on.
func (s *Server) paceBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		st := &bodyState{}
		b := &pacedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(), lim: s.HTTP, st: st}
		// Set now, not at the first Read: a handler that never reads the
		// body still has the server drain some of it afterwards.
		_ = b.rc.SetReadDeadline(b.deadline())
		r = r.WithContext(context.WithValue(r.Context(), &bodyStateKey{}, st))
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

type pacedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	lim   HTTPLimits
	st    *bodyState
	n     int64
	done  bool
}

func (b *pacedBody) deadline() time.Time {
	return b.start.Add(b.lim.BodyTimeout + time.Duration(float64(b.n)/float64(b.lim.MinRate)*float64(time.Second)))
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	_ = b.rc.SetReadDeadline(b.deadline())
	b.st.started.Store(true)
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		b.done = true
		b.st.ended.Store(true)
		_ = b.rc.SetReadDeadline(time.Time{})
		_ = b.rc.SetWriteDeadline(time.Now().Add(b.lim.WriteTimeout))
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		b.st.tooSlow.Store(true)
		err = fmt.Errorf("the request body arrived slower than %d bytes/s: %w", b.lim.MinRate, err)
	}
	return n, err
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// inFlight counts requests being served, in all and per key.
type inFlight struct {
	all       atomic.Int64
	max       int64
	mu        sync.Mutex
	perKey    map[string]int
	maxPerKey int
}

func newInFlight(l HTTPLimits) *inFlight {
	return &inFlight{max: int64(l.MaxInFlight), maxPerKey: l.MaxInFlightPerKey, perKey: map[string]int{}}
}

// tooManyRequests answers 429 too_many_requests with Retry-After.
func tooManyRequests(w http.ResponseWriter, detail string) {
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusTooManyRequests, "too_many_requests", detail)
}

// limitInFlight refuses a request while MaxInFlight are being served.
// Health probes pass uncounted, so a busy server is not taken for a dead
// one.
func (s *Server) limitInFlight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		if s.inFlight.all.Add(1) > s.inFlight.max {
			s.inFlight.all.Add(-1)
			tooManyRequests(w, fmt.Sprintf("the server is serving its most requests at once (%d); retry shortly", s.inFlight.max))
			return
		}
		defer s.inFlight.all.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// limitKeyInFlight refuses a key's request while MaxInFlightPerKey of its
// requests are being served. It runs after authenticate.
func (s *Server) limitKeyInFlight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, id := s.inFlight, keyOf(r).ID
		f.mu.Lock()
		if f.perKey[id] >= f.maxPerKey {
			f.mu.Unlock()
			tooManyRequests(w, fmt.Sprintf("this key has %d requests in flight, its most at once; retry when one ends", f.maxPerKey))
			return
		}
		f.perKey[id]++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			if f.perKey[id]--; f.perKey[id] <= 0 {
				delete(f.perKey, id) // the map holds only keys in flight
			}
			f.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}
