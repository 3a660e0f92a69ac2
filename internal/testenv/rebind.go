package testenv

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
)

// Rebinder is a resolver (egress.Resolver) that answers the first lookup
// with First and every later one with Rest: a name server that passes the
// policy's check, then points elsewhere (DNS rebinding). The egress and
// webhook tests use it to show each connection goes to the address its
// own lookup returned and the policy checked.
type Rebinder struct {
	First, Rest netip.Addr
	n           atomic.Int32
}

// LookupNetIP answers First once, then Rest.
func (r *Rebinder) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	if r.n.Add(1) == 1 {
		return []netip.Addr{r.First}, nil
	}
	return []netip.Addr{r.Rest}, nil
}

// Port is the port of a host:port address.
func Port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
