package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/sandbox"
)

// GuardDocker puts docker and podman shims first in $PATH that record any
// call. Call it from TestMain; the returned func reports calls and must run
// after the tests.
func GuardDocker() (check func() error) {
	dir, err := os.MkdirTemp("", "renderbox-shims-")
	if err != nil {
		panic(err)
	}
	marker := filepath.Join(dir, "called")
	for _, name := range []string{"docker", "podman", "docker-compose"} {
		script := fmt.Sprintf("#!/bin/sh\necho \"%s $*\" >> %s\nexit 97\n", name, marker)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			panic(err)
		}
	}
	os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() error {
		defer os.RemoveAll(dir)
		if b, err := os.ReadFile(marker); err == nil {
			return fmt.Errorf("a container engine was executed during the tests:\n%s", b)
		}
		return nil
	}
}

// Run runs a test package's tests with GuardDocker around them and returns
// the exit code; call it from TestMain: os.Exit(testenv.Run(m)).
func Run(m *testing.M) int {
	check := GuardDocker()
	code := m.Run()
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// Poll calls cond every 20ms until it holds, failing the test if it does
// not within d. Use it instead of a sleep that guesses how long something
// takes.
func Poll(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within %v", what, d)
}

// Canary opens a host TCP listener on addr (e.g. "127.0.0.1:0") that counts
// connections, closed when the test ends.
func Canary(t testing.TB, addr string) *sandbox.Canary {
	t.Helper()
	c, err := sandbox.NewCanary(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
