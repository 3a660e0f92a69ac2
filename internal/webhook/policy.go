// Package webhook tells clients that their job ended: a signed POST in the
// Standard Webhooks format (https://www.standardwebhooks.com) to the
// callback_url the job named, retried with backoff.
//
// A callback URL is chosen by the client, so a webhook is a request the
// server makes on an untrusted party's behalf. Only public addresses are
// dialed unless the operator allows more, and the address checked is the
// address dialed: the name is resolved once per connection and the
// connection goes to that resolved address, so a name that answers
// differently the second time (DNS rebinding) gains nothing.
package webhook

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"

	"github.com/renderbox/renderbox/internal/cidr"
)

// MaxURLLength bounds a callback URL.
const MaxURLLength = 2048

// ErrRefused marks an address or URL the policy does not allow.
var ErrRefused = errors.New("not allowed for webhooks")

// nonPublic lists special-purpose ranges that net/netip's predicates do not
// cover (RFC 6890 and its updates). Loopback, private, link-local,
// multicast and unspecified addresses are refused by predicate.
var nonPublic = mustPrefixes(
	"0.0.0.0/8",       // "this network"
	"100.64.0.0/10",   // carrier-grade NAT, shared address space
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // TEST-NET-1
	"192.88.99.0/24",  // 6to4 relay anycast (deprecated, RFC 7526)
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // TEST-NET-2
	"203.0.113.0/24",  // TEST-NET-3
	"240.0.0.0/4",     // reserved, and 255.255.255.255
	"::/96",           // IPv4-compatible (deprecated): ::127.0.0.1 reaches the IPv4 loopback on some stacks
	"::ffff:0:0/96",   // IPv4-mapped, written as IPv6 to slip past IPv4 checks
	"64:ff9b::/96",    // NAT64: reaches an IPv4 address of the translator's choosing
	"64:ff9b:1::/48",  // local-use NAT64
	"100::/64",        // discard-only
	"2001::/23",       // IETF protocol assignments (Teredo, ORCHID, ...)
	"2001:db8::/32",   // documentation
	"2002::/16",       // 6to4: embeds an IPv4 address
	"fec0::/10",       // site-local (deprecated, RFC 3879): private in practice
)

func mustPrefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

// Policy decides which addresses a webhook may be delivered to.
type Policy struct {
	// Allow lists ranges the operator permits although they are not
	// public (e.g. 10.0.0.0/8 for receivers on the same network).
	Allow []netip.Prefix
}

// ParseAllow reads a comma-separated list of CIDR ranges or single
// addresses, as the -webhook-allow flag takes them.
func ParseAllow(s string) ([]netip.Prefix, error) {
	ps, err := cidr.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("webhook allow list: %w", err)
	}
	return ps, nil
}

// Check reports whether a webhook may connect to a: nil for a public
// address or one in Allow, an error wrapping ErrRefused otherwise. An
// IPv4-mapped address (::ffff:a.b.c.d) is allowed only when the operator
// allows its IPv4 address: written that way it is a client's attempt to
// dodge the IPv4 rules. (The dialer unmaps what the resolver returns
// before checking, since Go reports IPv4 answers in that form.)
func (p Policy) Check(a netip.Addr) error {
	a = a.WithZone("")
	for _, pr := range p.Allow {
		if pr.Contains(a.Unmap()) {
			return nil
		}
	}
	if why := special(a); why != "" {
		return fmt.Errorf("%s is a %s address: %w", a, why, ErrRefused)
	}
	return nil
}

// special names the kind of a non-public address, or "" for a public one.
func special(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsUnspecified():
		return "unspecified"
	}
	for _, pr := range nonPublic {
		if pr.Contains(a) {
			return "special-purpose (" + pr.String() + ")"
		}
	}
	return ""
}

// CheckURL validates a callback URL when a job is submitted: http or https,
// a host, no credentials, and, when the host is an address literal, an
// address the policy allows. Names are checked when they are dialed, since
// what they resolve to can change.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("callback_url is longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("callback_url is not a URL: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("callback_url must be an http or https URL, not %q", u.Scheme)
	case u.Hostname() == "":
		return nil, errors.New("callback_url has no host")
	case u.User != nil:
		return nil, errors.New("callback_url must not carry credentials; verify the webhook-signature header instead")
	case u.Fragment != "":
		return nil, errors.New("callback_url must not have a #fragment")
	}
	if port := u.Port(); port == "0" {
		return nil, errors.New("callback_url has port 0")
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := p.Check(a); err != nil {
			return nil, fmt.Errorf("callback_url: %w", err)
		}
	}
	return u, nil
}
