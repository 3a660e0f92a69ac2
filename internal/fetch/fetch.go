// Package fetch is a bounded fetcher on top of egress: per job a budget of
// requests and bytes, a bound on each response enforced as bytes arrive,
// everything inside the job's context, and a record of each fetch for the
// job's diagnostics. docs/security.md, "Fetching on the host".
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/renderbox/renderbox/internal/egress"
)

// Limits bound one job's fetches.
type Limits struct {
	// MaxRequests bounds the requests of one job. Default 500.
	MaxRequests int
	// MaxBytes bounds the bytes of all of one job's responses. Default
	// 50 MiB.
	MaxBytes int64
	// MaxResponseBytes bounds one response. Default MaxBytes.
	MaxResponseBytes int64
}

// Defaults of Limits.
const (
	DefaultMaxRequests = 500
	DefaultMaxBytes    = 50 << 20
)

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	if l.MaxRequests <= 0 {
		l.MaxRequests = DefaultMaxRequests
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxResponseBytes <= 0 || l.MaxResponseBytes > l.MaxBytes {
		l.MaxResponseBytes = l.MaxBytes
	}
	return l
}

// Refusal reasons of the fetcher's own, beside egress's (scheme, host,
// address, redirects); they label renderbox_fetch_refusals_total.
const (
	ReasonTooLarge = "too_large" // a response over its bound, cut
	ReasonRequests = "requests"  // the job's request budget is spent
	ReasonBytes    = "bytes"     // the job's byte budget is spent
	ReasonMethod   = "method"    // a page's request other than GET (Broker)
)

// ErrTooLarge marks a response cut at its bound (or refused for the
// length it declared); it is also a refusal (egress.ErrRefused) with
// reason ReasonTooLarge or ReasonBytes.
var ErrTooLarge = errors.New("response too large")

// tooLarge is a response over its bound: ErrTooLarge and a refusal.
type tooLarge struct {
	reason string
	msg    string
}

func (e *tooLarge) Error() string { return e.msg }
func (e *tooLarge) Is(t error) bool {
	return t == ErrTooLarge || t == egress.ErrRefused
}

// ReasonOf is err's refusal reason, "" when err is no refusal.
func ReasonOf(err error) string {
	var tl *tooLarge
	if errors.As(err, &tl) {
		return tl.reason
	}
	var b *budgetError
	if errors.As(err, &b) {
		return b.reason
	}
	return egress.ReasonOf(err)
}

type budgetError struct{ reason, msg string }

func (e *budgetError) Error() string          { return e.msg }
func (e *budgetError) Is(t error) bool        { return t == egress.ErrRefused }
func newBudgetError(reason, msg string) error { return &budgetError{reason, msg} }

// Metrics are the fetchers' Prometheus counters.
type Metrics struct {
	fetches  *prometheus.CounterVec
	bytes    prometheus.Counter
	refusals *prometheus.CounterVec
}

// NewMetrics makes the counters and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderbox_fetches_total", Help: "Requests made on a client's behalf (download_from), by outcome: ok (2xx), status (another status), error (no answer), refused.",
		}, []string{"outcome"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "renderbox_fetch_bytes_total", Help: "Response bytes read on a client's behalf.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderbox_fetch_refusals_total", Help: "Fetches refused or cut, by reason: scheme, host, address, redirects, too_large, requests, bytes.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.fetches, m.bytes, m.refusals)
	return m
}

// Fetcher makes bounded requests under an egress policy. It is safe for
// concurrent use; each job takes a Session.
type Fetcher struct {
	client  *http.Client
	policy  egress.Policy
	limits  Limits
	metrics *Metrics
	// perKey, when set, bounds each key's fetches in flight across its
	// sessions (SessionOf); they wait for a slot.
	perKey *KeySlots
}

// New returns a Fetcher dialing through d, each job bounded by l; m may be
// nil.
func New(d *egress.Dialer, l Limits, m *Metrics) *Fetcher {
	c := egress.NewClient(d, egress.TransportOptions{})
	check := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		// Each redirect's target is recorded, the one refused included,
		// and is a request of the job's budget.
		if f, ok := req.Context().Value(fetchKey{}).(*inFlight); ok {
			f.hops = append(f.hops, Redact(req.URL.String()))
			if err := f.s.spend(); err != nil {
				return err
			}
		}
		return check(req, via)
	}
	return &Fetcher{client: c, policy: d.Policy, limits: l.WithDefaults(), metrics: m}
}

// fetchKey keys a fetch's inFlight in its request's context.
type fetchKey struct{}

// inFlight is one fetch as its redirects see it.
type inFlight struct {
	s    *Session
	hops []string
}

// spend takes a request from the budget.
func (s *Session) spend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requests >= s.f.limits.MaxRequests {
		return newBudgetError(ReasonRequests, fmt.Sprintf("the job's %d requests are spent", s.f.limits.MaxRequests))
	}
	s.requests++
	return nil
}

// Limits are the fetcher's bounds, defaults filled.
func (f *Fetcher) Limits() Limits { return f.limits }

// Record is one fetch as a job's diagnostics show it.
type Record struct {
	URL    string `json:"url"` // without credentials (Redact)
	Status int    `json:"status,omitempty"`
	Bytes  int64  `json:"bytes"`
	// Redirects are the URLs redirected to, in order (Redact), the last
	// the one refused when a redirect was.
	Redirects []string `json:"redirects,omitempty"`
	Ms        int64    `json:"ms"`
	Refused   string   `json:"refused,omitempty"` // the refusal's reason
	Error     string   `json:"error,omitempty"`
	// FromCache says whether a cache answered the request instead of
	// its origin. It is false for every record, and recorded so that a
	// reader need not guess: the host keeps no cache, and its answers to
	// a page tell Chromium to store none of them (Cache-Control:
	// no-store), so every request a URL page makes reaches the host and is
	// a record here. A resource a page uses twice in one document is
	// mostly one request (Chromium reuses one still loading, and asks
	// again when the first answer had already finished); another document
	// (an iframe) asks for it again (TestURLPageEndToEnd, "nothing is
	// answered from a cache").
	FromCache bool `json:"from_cache"`
}

// Session is one job's fetches: its budget and its records.
type Session struct {
	f        *Fetcher
	key      string
	mu       sync.Mutex
	requests int
	bytes    int64
	records  []Record
}

// Session starts a job's budget.
func (f *Fetcher) Session() *Session { return &Session{f: f} }

// SessionOf starts the budget of a job of key: its fetches also wait for
// one of key's slots when the fetcher bounds keys (Config.MaxPerKey).
func (f *Fetcher) SessionOf(key string) *Session { return &Session{f: f, key: key} }

// Records are the fetches so far.
func (s *Session) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Request is one fetch.
type Request struct {
	URL    string
	Header http.Header // sent as given; never recorded
	// Max bounds this response below the fetcher's own bounds; 0 for
	// none.
	Max int64
	// Head, when set, sees a 2xx response's head before its body is
	// read; its error ends the fetch and is returned as it is.
	Head func(*Response) error
}

// Response is a fetched response's head; the body went to the writer.
type Response struct {
	Status int
	Header http.Header
	// ContentLength is the declared length, -1 when unknown.
	ContentLength int64
	// URL is where the body came from, after redirects.
	URL *url.URL
}

// Fetch makes req with ctx (whose deadline bounds it all) and copies a
// 2xx answer's body into w, at most the response's bound: over it the copy
// stops with an error wrapping ErrTooLarge. A non-2xx answer's body is not
// read; its status is in Response and the error says it. Errors from w
// are returned as they are.
func (s *Session) Fetch(ctx context.Context, req Request, w io.Writer) (*Response, error) {
	if slots := s.f.perKey; slots != nil {
		// The wait is not the fetch's: its ms start once the slot is had.
		if err := slots.Take(ctx, s.key); err != nil {
			err = fmt.Errorf("waiting for one of its key's fetches to end: %s", deadlineWords(ctx))
			s.refuse(Record{URL: Redact(req.URL), Error: err.Error()})
			return nil, err
		}
		defer slots.Give(s.key)
	}
	start := time.Now()
	rec := Record{URL: Redact(req.URL)}
	f := &inFlight{s: s}
	resp, n, err := s.fetch(context.WithValue(ctx, fetchKey{}, f), req, w)
	rec.Bytes, rec.Ms, rec.Redirects = n, time.Since(start).Milliseconds(), f.hops
	if resp != nil {
		rec.Status = resp.Status
	}
	outcome := "ok"
	switch {
	case ReasonOf(err) != "":
		rec.Refused, outcome = ReasonOf(err), "refused"
		rec.Error = err.Error()
	case err != nil && resp == nil:
		rec.Error, outcome = err.Error(), "error"
	case err != nil:
		rec.Error, outcome = err.Error(), "status"
	}
	if m := s.f.metrics; m != nil {
		m.fetches.WithLabelValues(outcome).Inc()
		m.bytes.Add(float64(n))
	}
	s.record(rec)
	return resp, err
}

// refuse records a request refused before it was made.
func (s *Session) refuse(rec Record) {
	if m := s.f.metrics; m != nil {
		m.fetches.WithLabelValues("refused").Inc()
	}
	s.record(rec)
}

// record keeps rec, and counts its refusal.
func (s *Session) record(rec Record) {
	if m := s.f.metrics; m != nil && rec.Refused != "" {
		m.refusals.WithLabelValues(rec.Refused).Inc()
	}
	s.mu.Lock()
	s.records = append(s.records, rec)
	s.mu.Unlock()
}

func (s *Session) fetch(ctx context.Context, req Request, w io.Writer) (*Response, int64, error) {
	l := s.f.limits
	u, err := url.Parse(req.URL)
	if err != nil {
		// Not quoted back: the text may hold credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, 0, fmt.Errorf("not a URL: %v", err)
	}
	if err := s.f.policy.CheckURL(u); err != nil {
		return nil, 0, err
	}
	if err := s.spend(); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	left := l.MaxBytes - s.bytes
	s.mu.Unlock()
	max, reason := l.MaxResponseBytes, ReasonTooLarge
	if req.Max > 0 && req.Max < max {
		max = req.Max
	}
	if left < max {
		max, reason = left, ReasonBytes
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	if hr.Header.Get("User-Agent") == "" {
		hr.Header.Set("User-Agent", UserAgent)
	}
	resp, err := s.f.client.Do(hr)
	if err != nil {
		return nil, 0, clientError(ctx, err)
	}
	defer resp.Body.Close()
	r := &Response{Status: resp.StatusCode, Header: resp.Header, ContentLength: resp.ContentLength, URL: resp.Request.URL}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return r, 0, fmt.Errorf("the origin answered %s", resp.Status)
	}
	over := func(what string) error {
		bound := fmt.Sprintf("the %d bytes it may be", max)
		if reason == ReasonBytes {
			bound = fmt.Sprintf("the job's %d bytes left to fetch", max)
		}
		return &tooLarge{reason: reason, msg: fmt.Sprintf("the response is %s, over %s", what, bound)}
	}
	if resp.ContentLength > max {
		return r, 0, over(fmt.Sprintf("declared as %d bytes (Content-Length)", resp.ContentLength))
	}
	if req.Head != nil {
		if err := req.Head(r); err != nil {
			return r, 0, err
		}
	}
	tw := &trackedWriter{w: w}
	n, err := io.Copy(tw, io.LimitReader(resp.Body, max))
	if err == nil && n == max {
		// One byte more says whether the body ends at the bound.
		var one [1]byte
		if k, _ := io.ReadFull(resp.Body, one[:]); k > 0 {
			err = over(fmt.Sprintf("longer than %d bytes", max))
		}
	}
	s.mu.Lock()
	s.bytes += n
	s.mu.Unlock()
	switch {
	case tw.err != nil:
		return r, n, tw.err // the caller's own, as it is
	case err != nil && ReasonOf(err) == "" && ctx.Err() != nil:
		err = fmt.Errorf("reading the response: %s", deadlineWords(ctx))
	case err != nil && ReasonOf(err) == "":
		err = fmt.Errorf("reading the response: %w", err)
	}
	return r, n, err
}

// UserAgent is sent unless the request names its own.
const UserAgent = "renderbox-fetch/1"

// trackedWriter keeps the error of the caller's writer, which Fetch
// returns as it is; a body's read errors are worded as such.
type trackedWriter struct {
	w   io.Writer
	err error
}

func (t *trackedWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil && t.err == nil {
		t.err = err
	}
	return n, err
}

func deadlineWords(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "the time for fetching ran out"
	}
	return "canceled"
}

// clientError words an http.Client error: a refusal as itself, the
// deadline as such, and otherwise without the addresses a name led to.
func clientError(ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if ReasonOf(err) == "" && ctx.Err() != nil {
		return errors.New(deadlineWords(ctx))
	}
	return err
}

// Redact is u without what may be a secret: its user info and its query
// values (a presigned URL's signature), for records and messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not a URL)"
	}
	u.User = nil
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"redacted"}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
