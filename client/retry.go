package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// retrier paces the tries of one call: a growing pause from 250 ms to
// 5 s (or the server's Retry-After), all of them within MaxRetryTime.
type retrier struct {
	c     *Client
	op    string
	n     int
	start time.Time
	limit time.Duration
}

func (c *Client) retrier(op string) *retrier {
	limit := c.MaxRetryTime
	if limit == 0 {
		limit = 30 * time.Second
	}
	return &retrier{c: c, op: op, start: time.Now(), limit: limit}
}

// pause reports the failed attempt err and sleeps before the next, or
// returns the error to give up with: err itself when it is permanent,
// else err wrapped with the attempts made.
func (r *retrier) pause(ctx context.Context, err error, last bool) error {
	r.n++
	a := Attempt{Op: r.op, N: r.n, Err: err, Elapsed: time.Since(r.start)}
	var apiErr *Error
	switch {
	case ctx.Err() != nil || !Transient(err):
		r.report(a)
		return err
	case errors.As(err, &apiErr) && apiErr.RetryAfter > 0:
		a.Next = apiErr.RetryAfter
	default:
		a.Next = min(250*time.Millisecond<<min(r.n-1, 5), 5*time.Second)
	}
	if last || a.Elapsed+a.Next > r.limit {
		a.Next = 0
		r.report(a)
		return fmt.Errorf("renderbox: gave up after %d attempts in %.1fs (at most %s of retries): %w", r.n, a.Elapsed.Seconds(), r.limit, err)
	}
	r.report(a)
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w (while waiting to retry after: %v)", ctx.Err(), err)
	case <-time.After(a.Next):
		return nil
	}
}

func (r *retrier) report(a Attempt) {
	if r.c.OnRetry != nil {
		r.c.OnRetry(a)
	}
}

// Transient reports whether err may pass if the call is made again: a
// connection that failed, 5xx, 408 or 429. Refusals (other 4xx), local
// files that cannot be read and a done context are permanent.
func Transient(err error) bool {
	var apiErr *Error
	var tErr *transportError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &apiErr):
		return apiErr.Status >= 500 || apiErr.Status == http.StatusRequestTimeout || apiErr.Status == http.StatusTooManyRequests
	case errors.As(err, &tErr):
		return true
	}
	return false
}

// unanswerable reports whether a request that got no answer never will:
// a host name that does not resolve, a certificate that is not trusted.
func unanswerable(err error) bool {
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var host x509.HostnameError
	var authority x509.UnknownAuthorityError
	return errors.As(err, &dns) && dns.IsNotFound || errors.As(err, &cert) || errors.As(err, &host) || errors.As(err, &authority)
}

// transportError is a request that got no answer (refused, reset, cut).
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }
