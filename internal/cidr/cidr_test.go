package cidr

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, want string // want: the prefixes, or "error"
	}{
		{"", "[]"},
		{"10.0.0.0/8", "[10.0.0.0/8]"},
		{" 192.0.2.7 , 10.1.2.3/8,", "[192.0.2.7/32 10.0.0.0/8]"},
		{"::ffff:192.0.2.7", "[192.0.2.7/32]"},
		{"2001:db8::/32", "[2001:db8::/32]"},
		{"10.0.0.0/33", "error"},
		{"proxy.internal", "error"},
	} {
		ps, err := Parse(c.in)
		got := fmt.Sprint(ps)
		if ps == nil && err == nil {
			got = "[]"
		}
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("Parse(%q) = %s (%v), want %s", c.in, got, err, c.want)
		}
	}
}

func TestContains(t *testing.T) {
	ps, _ := Parse("10.0.0.0/8, 2001:db8::1")
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"10.2.3.4", true}, {"::ffff:10.2.3.4", true}, {"11.0.0.1", false},
		{"2001:db8::1", true}, {"2001:db8::2", false},
	} {
		if got := Contains(ps, netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("Contains(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}
