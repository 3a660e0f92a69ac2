package rootfs

import "testing"

func TestLinkEscapes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rel, target string
		want        bool
	}{
		{"etc/localtime", "/usr/share/zoneinfo/UTC", false},
		{"etc/os-release", "../usr/lib/os-release", false},
		{"lib", "usr/lib", false},
		{"etc/x", "../../etc/shadow", true},
		{"x", "..", true},
		{"a/b/c", "../../..", true},
		{"a/b/c", "../../d/../..", true},
		{"a/b", "", true},
	} {
		if got := linkEscapes(c.rel, c.target); got != c.want {
			t.Errorf("linkEscapes(%q, %q) = %v, want %v", c.rel, c.target, got, c.want)
		}
	}
}
