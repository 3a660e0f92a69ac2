// Package testenv gives tests the real things they need — runsc, the
// rootfs, a private sandbox manager — and fails (never skips) with the
// command that gets them when they are missing. It also guards against
// tests reaching for docker or podman.
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/wire"
)

// RootfsTree returns the built rootfs tree ($RENDERBOX_ROOTFS or
// /var/lib/renderbox/rootfs/current).
func RootfsTree(t testing.TB) string {
	t.Helper()
	tree := os.Getenv("RENDERBOX_ROOTFS")
	if tree == "" {
		tree = "/var/lib/renderbox/rootfs/current"
	}
	if _, err := os.Stat(filepath.Join(rootfs.Dir(tree), rootfs.AgentPath)); err != nil {
		t.Fatalf("the renderer rootfs is missing at %s (%v); build it with: make rootfs (as root)", tree, err)
	}
	return tree
}

// Runsc returns the runsc binary ($RENDERBOX_RUNSC, $PATH or
// /usr/local/bin/runsc) after checking its version.
func Runsc(t testing.TB) string {
	t.Helper()
	p, err := sandbox.Locate(os.Getenv("RENDERBOX_RUNSC"))
	if err != nil {
		t.Fatalf("%v; or run: make setup", err)
	}
	if _, err := sandbox.CheckVersion(context.Background(), p); err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// Manager returns a sandbox manager with a private state dir and cgroup
// parent. When the test ends it fails the test if any container, bundle or
// cgroup is left over, then removes the parent cgroup.
func Manager(t testing.TB, cfg sandbox.Config) *sandbox.Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("sandbox tests must run as root (runsc creates cgroups); run them with sudo or as root")
	}
	if err := sandbox.CheckCgroups(); err != nil {
		t.Fatal(err)
	}
	cfg.Runsc = Runsc(t)
	if cfg.Rootfs == "" {
		cfg.Rootfs = rootfs.Dir(RootfsTree(t))
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	if cfg.StateDir == "" {
		// runsc's state lives under /run like in production; t.TempDir
		// paths can be too long for the sockets runsc makes.
		cfg.StateDir = "/run/renderbox-test/" + suffix
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "renderbox-test-" + suffix
	}
	m, err := sandbox.NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		left, err := m.Leftovers(ctx)
		if err != nil {
			t.Errorf("listing leftovers: %v", err)
		}
		if len(left) > 0 {
			t.Errorf("sandboxes left behind after the test: %v", left)
			_, _ = m.Reap(ctx)
		}
		for _, d := range sandbox.ParentCgroupDirs(cfg.CgroupParent) {
			_ = os.Remove(d)
		}
		_ = os.RemoveAll(cfg.StateDir)
	})
	return m
}

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

// RootfsDir returns the rootfs/ directory of the built tree.
func RootfsDir(t testing.TB) string { return rootfs.Dir(RootfsTree(t)) }

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

// Redis starts a private redis-server on a free loopback port for the test
// (no persistence unless persist) and returns its address.
func Redis(t testing.TB, persist bool) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is missing; install it with: apt-get install -y redis-server (or: make setup)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--maxmemory-policy", "noeviction", "--protected-mode", "yes", "--appendonly", "no"}
	if persist {
		args = append(args[:len(args)-1], "yes", "--appendfsync", "always")
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("redis-server did not listen on %s", addr)
	return ""
}

// Tool runs a poppler tool (pdftotext, pdfinfo, …) on a PDF inside a
// sandbox — parsing a renderer's output is untrusted work too — and returns
// its standard output.
func Tool(t testing.TB, m *sandbox.Manager, prog string, pdf []byte, args ...string) string {
	t.Helper()
	argv := append([]string{"/usr/bin/" + prog}, args...)
	argv = append(argv, wire.InputDir+"/in.pdf")
	if prog == "pdftotext" {
		argv = append(argv, "-") // to stdout
	}
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{
			Mode: wire.ModeRender, InputName: "in.pdf", InputSize: int64(len(pdf)),
			Steps: []wire.Step{{Argv: argv, Stdout: wire.OutputDir + "/stdout.txt"}},
			Env:   []string{"PATH=/usr/bin:/bin"},
		},
		Input: bytes.NewReader(pdf),
	})
	if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	return string(res.Response.Files[0].Data)
}

// PDFText extracts a PDF's text in a sandbox.
func PDFText(t testing.TB, m *sandbox.Manager, pdf []byte) string {
	t.Helper()
	return Tool(t, m, "pdftotext", pdf, "-layout")
}
