// Package exe writes the executables a test runs (a fake runsc, a wrapper,
// a shim) so that running one never fails with "text file busy".
//
// A file this process opens for writing is inherited by every child that
// another goroutine forks while it is open: until that child calls exec,
// the file has a writer, and the kernel refuses to exec it (ETXTBSY). With
// parallel tests forking all the time, os.WriteFile then exec fails now
// and then. Write has a child write the file instead, so this process
// never holds it open. It depends on nothing in renderbox, so the
// packages testenv imports (sandbox, rootfs) can use it in their own
// tests, and it has no build tag: the unit tier uses it too.
package exe

import (
	"os/exec"
	"strings"
	"testing"
)

// Write makes path an executable (0755) holding body, or fails t.
func Write(t testing.TB, path, body string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `cat > "$1" && chmod 0755 "$1"`, "sh", path)
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing the executable %s: %v: %s", path, err, out)
	}
}
