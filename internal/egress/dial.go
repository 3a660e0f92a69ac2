package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Resolver looks names up; *net.Resolver is one. Tests substitute their own
// to play a rebinding name server.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects only where its Policy allows.
type Dialer struct {
	Policy   Policy
	Resolver Resolver // net.DefaultResolver when nil
}

var (
	// ErrNoName: the host's name did not resolve.
	ErrNoName     = errors.New("name did not resolve")
	errNotAllowed = &Refusal{Reason: ReasonAddress, msg: "address " + ErrRefused.Error()}
)

// DialContext resolves the host once, keeps the addresses the policy
// allows and connects to one of those very addresses. The socket is
// checked again in Control, just before it connects, so no path reaches a
// refused address.
//
// Its errors reach clients (a webhook's last_error, a download's problem):
// they say what went wrong in general words and never name an address the
// name resolved to, nor the resolver's answer or address, so a tenant
// cannot map the host's internal names through them.
func (d *Dialer) DialContext(ctx context.Context, network, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a} // the client's own literal, checked as written
	} else {
		r := d.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		found, err := r.LookupNetIP(ctx, "ip", host)
		if err != nil || len(found) == 0 {
			return nil, fmt.Errorf("%s: %w", host, ErrNoName)
		}
		for _, a := range found {
			addrs = append(addrs, a.Unmap()) // Go reports IPv4 answers as ::ffff:a.b.c.d
		}
	}
	nd := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return errNotAllowed
		}
		return d.Policy.Check(ap.Addr())
	}}
	var failed error
	for _, a := range addrs {
		if d.Policy.Check(a) != nil {
			continue
		}
		c, err := nd.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, ErrRefused) && failed == nil {
			failed = err
		}
	}
	if failed != nil {
		// Not a refusal: an allowed address may answer next time.
		return nil, fmt.Errorf("connecting to %s: %s", host, ConnectFailure(failed))
	}
	return nil, &Refusal{Reason: ReasonAddress, msg: host + ": " + errNotAllowed.msg}
}

// ConnectFailure says why a connection failed without the address it went
// to (a *net.OpError names it).
func ConnectFailure(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "connection failed"
}

// TransportOptions shape NewTransport's connections.
type TransportOptions struct {
	// HeaderTimeout bounds TLS handshakes and waiting for a response's
	// head; 0 leaves them to the request's context.
	HeaderTimeout time.Duration
	// MaxIdleConnsPerHost: 2 when 0.
	MaxIdleConnsPerHost int
}

// NewTransport returns an HTTP transport that dials through d and never
// through a proxy, which would dial on the server's behalf, unchecked.
func NewTransport(d *Dialer, o TransportOptions) *http.Transport {
	if o.MaxIdleConnsPerHost == 0 {
		o.MaxIdleConnsPerHost = 2
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		TLSHandshakeTimeout:    o.HeaderTimeout,
		ResponseHeaderTimeout:  o.HeaderTimeout,
		MaxResponseHeaderBytes: 16 << 10,
		MaxIdleConnsPerHost:    o.MaxIdleConnsPerHost,
		IdleConnTimeout:        30 * time.Second,
		ForceAttemptHTTP2:      true,
	}
}

// NewClient returns a client whose every connection goes through d and
// whose every redirect is checked against d's policy as a new URL, at most
// MaxRedirects of them. A redirect to another host (or port) carries none
// of the first request's headers but its User-Agent: a client's
// X-Api-Key is as secret as its Authorization, which is all Go's client
// drops by itself.
func NewClient(d *Dialer, o TransportOptions) *http.Client {
	return &http.Client{
		Transport: NewTransport(d, o),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return refuse(ReasonRedirects, "more than %d redirects", MaxRedirects)
			}
			if err := d.Policy.CheckURL(req.URL); err != nil {
				return err
			}
			if first := via[0]; !strings.EqualFold(req.URL.Host, first.URL.Host) {
				for k := range first.Header {
					if k != "User-Agent" {
						req.Header.Del(k)
					}
				}
			}
			return nil
		},
	}
}
