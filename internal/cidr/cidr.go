// Package cidr reads lists of address ranges as the binaries' flags take
// them (-webhook-allow, -remote-allow, -remote-deny, -trusted-proxies):
// comma-separated CIDR ranges or single addresses.
package cidr

import (
	"fmt"
	"net/netip"
	"strings"
)

// Parse reads a comma-separated list of CIDR ranges or single addresses
// ("10.0.0.0/8, 192.0.2.7"); blanks are skipped. An IPv4-mapped address
// is taken as its IPv4 address, and a range is masked to its prefix.
func Parse(s string) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			ps = append(ps, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR range (e.g. 10.0.0.0/8)", f)
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}

// Contains reports whether a, unmapped, is in one of ps.
func Contains(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
