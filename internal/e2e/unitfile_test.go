//go:build !unit

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Reading the worker's systemd unit and a process's status for the unit test.

// capSet names the capabilities of a /proc/<pid>/status mask.
func capSet(hex string) []string {
	mask, _ := strconv.ParseUint(hex, 16, 64)
	var names []string
	for i, n := range capNames {
		if mask&(1<<i) != 0 {
			names = append(names, "+"+n)
		}
	}
	return names
}

// statusField is a field of /proc/<pid>/status.
func statusField(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return ""
}

// serviceSection returns the unit's [Service] directives, continuation
// lines joined, comments dropped.
func serviceSection(t *testing.T, unit string) []string {
	t.Helper()
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in, cont := false, false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case cont:
			out[len(out)-1] += " " + strings.TrimSuffix(line, "\\")
		case strings.HasPrefix(line, "["):
			in = line == "[Service]"
		case in && line != "" && !strings.HasPrefix(line, "#"):
			out = append(out, strings.TrimSuffix(line, "\\"))
		default:
			continue
		}
		cont = strings.HasSuffix(line, "\\")
	}
	return out
}

// without returns the directives with what drop removes from the value of
// directive name.
func without(directives []string, name, drop string) []string {
	out := slices.Clone(directives)
	for i, d := range out {
		if n, v, _ := strings.Cut(d, "="); n == name {
			out[i] = n + "=" + strings.Join(slices.DeleteFunc(strings.Fields(v), func(f string) bool { return f == drop }), " ")
		}
	}
	return out
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// verifyUnit runs systemd-analyze verify on a unit file in a root of its
// own (the systemd units it depends on, and an executable where ExecStart
// looks) and fails on anything it prints.
func verifyUnit(t *testing.T, unitFile string) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is missing (%v); install it with: make setup (Debian's systemd package)", err)
	}
	root := t.TempDir()
	sys := "/usr/lib/systemd/system"
	for _, d := range []string{"usr/local/bin", "etc/systemd/system", "usr/lib/systemd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", "-a", sys, filepath.Join(root, "usr/lib/systemd/")).CombinedOutput(); err != nil {
		t.Fatalf("copying %s: %v %s", sys, err, out)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/local/bin/renderbox-worker"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(unitFile)
	if err := os.WriteFile(filepath.Join(root, "etc/systemd/system", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", "--root="+root, name).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
}
