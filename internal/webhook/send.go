package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/egress"
)

// Resolver looks names up; *net.Resolver is one. Tests substitute their own
// to play a rebinding name server.
type Resolver = egress.Resolver

// Sender posts webhooks. Make one with NewSender; it is safe for
// concurrent use.
type Sender struct {
	client  *http.Client
	timeout time.Duration
}

// DefaultTimeout bounds one delivery attempt: connecting, sending and
// reading the answer's head.
const DefaultTimeout = 10 * time.Second

// UserAgent is sent with every webhook.
const UserAgent = "renderbox-webhook/1"

// NewSender returns a Sender that connects only where p allows, resolving
// names with r (net.DefaultResolver when nil), each attempt bounded by
// timeout (DefaultTimeout when zero).
func NewSender(p Policy, r Resolver, timeout time.Duration) *Sender {
	if r == nil {
		r = net.DefaultResolver
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	s := &Sender{timeout: timeout}
	// The dialer's errors end up in the job's webhook.last_error, which
	// the client reads: egress words them without the addresses a name
	// resolved to.
	d := &egress.Dialer{Policy: p.egress(), Resolver: r}
	s.client = &http.Client{
		Transport: egress.NewTransport(d, egress.TransportOptions{HeaderTimeout: timeout}),
		Timeout:   timeout,
		// A redirect is a new destination the policy has not seen in the
		// submitted URL; answer it as the receiver's failure instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s
}

// Timeout is the bound on one attempt.
func (s *Sender) Timeout() time.Duration { return s.timeout }

// Message is one webhook.
type Message struct {
	URL    string
	ID     string // webhook-id: the same for every attempt, so receivers can drop repeats
	Secret string // whsec_...
	Body   []byte // JSON
}

// Result is what one attempt got.
type Result struct {
	Status int   // the receiver's HTTP status; 0 when none was read
	Err    error // nil only for a 2xx answer
}

// Delivered reports whether the receiver took the message.
func (r Result) Delivered() bool { return r.Err == nil }

// Permanent reports whether retrying is pointless: the receiver answered
// 410 Gone, or the URL leads only to addresses the policy refuses.
func (r Result) Permanent() bool {
	return r.Status == http.StatusGone || errors.Is(r.Err, ErrRefused)
}

// Send makes one delivery attempt of m, signed at now.
func (s *Sender) Send(ctx context.Context, m Message, now time.Time) Result {
	sig, err := Sign(m.Secret, m.ID, now, m.Body)
	if err != nil {
		return Result{Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return Result{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("webhook-id", m.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := s.client.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	// Read a little so the connection can be reused; the answer's body
	// means nothing to us.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{Status: resp.StatusCode, Err: fmt.Errorf("the receiver answered %s", resp.Status)}
	}
	return Result{Status: resp.StatusCode}
}

// Schedule is the wait before each retry: Schedule[i] after the (i+1)th
// failed attempt. A message is tried len(Schedule)+1 times at most.
type Schedule []time.Duration

// DefaultSchedule retries for about a day, backing off from seconds to
// hours, as Standard Webhooks suggests.
var DefaultSchedule = Schedule{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
	30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour}

// ParseSchedule reads comma-separated durations, e.g. "5s,30s,2m".
func ParseSchedule(s string) (Schedule, error) {
	var sc Schedule
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("webhook retry schedule: %q is not a positive duration (e.g. 5s,30s,2m)", f)
		}
		sc = append(sc, d)
	}
	return sc, nil
}

// Next returns how long to wait after failed attempt number attempt
// (1-based) before the next one, with ±10% jitter so that a receiver's
// outage does not bring every retry back at once; ok is false when the
// attempts are used up.
func (sc Schedule) Next(attempt int) (time.Duration, bool) {
	if attempt < 1 || attempt > len(sc) {
		return 0, false
	}
	d := sc[attempt-1]
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d)), true
}
