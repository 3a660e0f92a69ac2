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

	"github.com/renderbox/renderbox/internal/egress"
)

// MaxURLLength bounds a callback URL.
const MaxURLLength = 2048

// ErrRefused marks an address or URL the policy does not allow; it is
// egress's, the policy every request made for a client follows.
var ErrRefused = egress.ErrRefused

// Policy decides which addresses a webhook may be delivered to.
type Policy struct {
	// Allow lists ranges the operator permits although they are not
	// public (e.g. 10.0.0.0/8 for receivers on the same network).
	Allow []netip.Prefix
}

// egress is p as the shared policy.
func (p Policy) egress() egress.Policy { return egress.Policy{Allow: p.Allow} }

// ParseAllow reads a comma-separated list of CIDR ranges or single
// addresses, as the -webhook-allow flag takes them.
func ParseAllow(s string) ([]netip.Prefix, error) {
	ps, err := egress.ParseCIDRs(s)
	if err != nil {
		return nil, fmt.Errorf("webhook allow list: %w", err)
	}
	return ps, nil
}

// Check reports whether a webhook may connect to a: nil for a public
// address or one in Allow, an error wrapping ErrRefused otherwise
// (egress.Policy.Check).
func (p Policy) Check(a netip.Addr) error { return p.egress().Check(a) }

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
