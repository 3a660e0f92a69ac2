//go:build !unit

// Package tool finds the host programs a test runs (mkfs.erofs,
// redis-server, …) and fails, never skips, with the Debian package that
// provides one when it is missing. It depends on nothing in renderbox, so
// a package that testenv itself imports (rootfs) can use it from its own
// tests; like testenv's machine parts it is outside the unit tier, and
// TestTiers counts a test that calls it as needing the machine.
package tool

import (
	"os"
	"os/exec"
	"testing"
)

// Need returns the path of the program name, or fails t with how to
// install deb, the package that provides it (scripts/setup.sh installs
// every one the tests need).
func Need(t testing.TB, name, deb string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is missing: apt-get install -y %s (make setup installs it)", name, deb)
	}
	return p
}

// Root fails t unless it runs as root: making device nodes, owning files
// as another user and cgroups need it (make test runs as root).
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs root (uid %d): run it as root, like make test", os.Geteuid())
	}
}
