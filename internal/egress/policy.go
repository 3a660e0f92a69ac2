// Package egress is the one policy for requests the server makes on a
// client's behalf (webhooks, inputs fetched from URLs): http and https
// only, public addresses only unless the operator allows more, and the
// address checked is the address dialed — each name is resolved once per
// connection, the connection goes to the very address the policy passed,
// and the socket is checked again in the dialer's Control hook just before
// it connects, so a name that answers differently the second time (DNS
// rebinding) gains nothing. docs/security.md ("Fetching on the host")
// describes the risks and the settings.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/renderbox/renderbox/internal/cidr"
)

// ErrRefused marks an address, host or URL the policy does not allow.
var ErrRefused = errors.New("not allowed")

// Reasons a Refusal gives; they label the refusal metrics, so the set is
// fixed.
const (
	ReasonScheme    = "scheme"    // not http or https
	ReasonHost      = "host"      // the host's name is denied, or not on the allow list
	ReasonAddress   = "address"   // a non-public or denied address
	ReasonRedirects = "redirects" // more redirects than MaxRedirects
)

// Refusal is the policy saying no: Reason is one of the Reason constants.
// It matches ErrRefused with errors.Is.
type Refusal struct {
	Reason string
	msg    string
}

func (r *Refusal) Error() string        { return r.msg }
func (r *Refusal) Is(target error) bool { return target == ErrRefused }

func refuse(reason, format string, a ...any) error {
	return &Refusal{Reason: reason, msg: fmt.Sprintf(format, a...) + ": " + ErrRefused.Error()}
}

// ReasonOf is err's refusal reason, "" when err is no refusal.
func ReasonOf(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// MaxRedirects bounds the redirects one request follows; each is checked
// as a new URL.
const MaxRedirects = 10

// nonPublic lists special-purpose ranges that net/netip's predicates do not
// cover (RFC 6890 and its updates). Loopback, private, link-local (the
// cloud metadata address 169.254.169.254 among them), multicast and
// unspecified addresses are refused by predicate.
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

// Policy decides where the server may connect. The zero value allows
// public addresses of any host.
type Policy struct {
	// Allow lists ranges the operator permits although they are not
	// public (e.g. 10.0.0.0/8 for an intranet).
	Allow []netip.Prefix
	// Deny lists ranges refused although public; it wins over Allow.
	Deny []netip.Prefix
	// AllowHosts, when not empty, are the only hosts that may be reached:
	// patterns as MatchHost reads them.
	AllowHosts []string
	// DenyHosts are hosts never reached; they win over AllowHosts.
	DenyHosts []string
}

// ParsePolicy reads a policy's four lists as flags take them (CIDRs for
// allow and deny, host patterns for the others); an error names the flag,
// prefix followed by allow, deny, allow-hosts or deny-hosts.
func ParsePolicy(prefix, allow, deny, allowHosts, denyHosts string) (Policy, error) {
	var p Policy
	var err error
	if p.Allow, err = ParseCIDRs(allow); err != nil {
		return p, fmt.Errorf("-%sallow: %w", prefix, err)
	}
	if p.Deny, err = ParseCIDRs(deny); err != nil {
		return p, fmt.Errorf("-%sdeny: %w", prefix, err)
	}
	if p.AllowHosts, err = ParseHosts(allowHosts); err != nil {
		return p, fmt.Errorf("-%sallow-hosts: %w", prefix, err)
	}
	if p.DenyHosts, err = ParseHosts(denyHosts); err != nil {
		return p, fmt.Errorf("-%sdeny-hosts: %w", prefix, err)
	}
	return p, nil
}

// ParseCIDRs reads a comma-separated list of CIDR ranges or single
// addresses, as the allow and deny flags take them.
func ParseCIDRs(s string) ([]netip.Prefix, error) { return cidr.Parse(s) }

// ParseHosts reads a comma-separated list of host patterns: a name
// (example.com: that name only) or *. and a name (*.example.com: every name
// under it, not example.com itself), or an address literal.
func ParseHosts(s string) ([]string, error) {
	var hs []string
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(f), "."))
		if f == "" {
			continue
		}
		name := strings.TrimPrefix(f, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@ ") && !isAddr(name) {
			return nil, fmt.Errorf("%q is not a host pattern (e.g. example.com or *.example.com)", f)
		}
		hs = append(hs, f)
	}
	return hs, nil
}

func isAddr(s string) bool {
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}

// MatchHost reports whether host matches pattern: equal names (case and a
// trailing dot aside), or for *.name any name ending in .name.
func MatchHost(pattern, host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return host == pattern
}

func matchAny(patterns []string, host string) bool {
	for _, p := range patterns {
		if MatchHost(p, host) {
			return true
		}
	}
	return false
}

// Check reports whether the server may connect to a: nil for a public
// address or one in Allow, and not in Deny; a *Refusal otherwise. An
// IPv4-mapped address (::ffff:a.b.c.d) is allowed only when the operator
// allows its IPv4 address: written that way it is a client's attempt to
// dodge the IPv4 rules. (The dialer unmaps what the resolver returns
// before checking, since Go reports IPv4 answers in that form.)
func (p Policy) Check(a netip.Addr) error {
	a = a.WithZone("")
	if cidr.Contains(p.Deny, a) {
		return refuse(ReasonAddress, "%s is a denied address", a)
	}
	if cidr.Contains(p.Allow, a) {
		return nil
	}
	if why := Special(a); why != "" {
		return refuse(ReasonAddress, "%s is a %s address", a, why)
	}
	return nil
}

// Special names the kind of a non-public address, or "" for a public one.
func Special(a netip.Addr) string {
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

// CheckHost applies the host lists to a URL's host name.
func (p Policy) CheckHost(host string) error {
	if matchAny(p.DenyHosts, host) {
		return refuse(ReasonHost, "host %s is denied", host)
	}
	if len(p.AllowHosts) > 0 && !matchAny(p.AllowHosts, host) {
		return refuse(ReasonHost, "host %s is not on the allow list", host)
	}
	return nil
}

// CheckURL checks what can be checked of u before dialing: the scheme, a
// host, the host lists and, when the host is an address literal, the
// address. Names are checked when they are dialed, since what they
// resolve to can change.
func (p Policy) CheckURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return refuse(ReasonScheme, "scheme %q (only http and https)", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return refuse(ReasonHost, "a URL without a host")
	}
	if u.Port() == "0" {
		return refuse(ReasonAddress, "port 0")
	}
	if err := p.CheckHost(host); err != nil {
		return err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(a)
	}
	return nil
}
