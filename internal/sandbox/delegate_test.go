package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOwnCgroup(t *testing.T) {
	v1 := func(memory, cpu, pids string) string {
		return "12:pids:" + pids + "\n5:cpu,cpuacct:" + cpu + "\n4:memory:" + memory + "\n1:name=systemd:" + memory + "\n0::/\n"
	}
	const unit = "/system.slice/renderbox-worker.service"
	for _, tc := range []struct {
		name, proc string
		v2         bool
		want, err  string
	}{
		{name: "v1 delegated", proc: v1(unit, unit, unit), want: unit},
		{name: "v1 one controller elsewhere", proc: v1(unit, "/", unit), err: "cgroups differ (memory " + unit + ", cpu /, pids " + unit},
		{name: "v1 root", proc: v1("/", "/", "/"), err: "in the root cgroups: nothing was delegated"},
		{name: "v1 no pids", proc: "4:memory:/a\n5:cpu:/a\n", err: "no v1 pids hierarchy"},
		{name: "v2 delegated", proc: "0::" + unit + "\n", v2: true, want: unit},
		{name: "v2 root", proc: "0::/\n", v2: true, err: "in the root cgroup: nothing was delegated"},
		{name: "v2 no line", proc: "4:memory:/a\n", v2: true, err: "no cgroup v2 line"},
	} {
		got, err := ownCgroup(tc.proc, tc.v2)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %q, %v; want an error with %q", tc.name, got, err, tc.err)
		case tc.err != "" && !strings.Contains(err.Error(), "Delegate=yes") && strings.Contains(tc.err, "delegated"):
			t.Errorf("%s: %v does not say how to delegate", tc.name, err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// On v2 the worker moves itself into a leaf of its delegated cgroup and
// turns the controllers on for the sandboxes (checked on a directory
// standing in for the cgroup filesystem: these hosts run v1).
func TestPrepareV2(t *testing.T) {
	root := t.TempDir()
	own := "/system.slice/renderbox-worker.service"
	dir := filepath.Join(root, own)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "cgroup.controllers"), "cpuset cpu io memory\n")
	if err := prepareV2(root, own, 4242); err == nil || !strings.Contains(err.Error(), "lacks the pids controller") {
		t.Errorf("a cgroup without pids: %v, want refused", err)
	}
	write(filepath.Join(dir, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	if err := prepareV2(root, own, 4242); err != nil {
		t.Fatal(err)
	}
	// cgroupfs makes its files readable and writable by the cgroup's
	// owner; here prepareV2's mode-0 writes make them, so the test,
	// which may not be root (make unit), gives them that mode.
	for _, f := range []string{"supervisor/cgroup.procs", "cgroup.subtree_control", "sandboxes/cgroup.subtree_control"} {
		if err := os.Chmod(filepath.Join(dir, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for f, want := range map[string]string{
		"supervisor/cgroup.procs":          "4242",
		"cgroup.subtree_control":           "+memory +cpu +pids",
		"sandboxes/cgroup.subtree_control": "+memory +cpu +pids",
	} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", f, b, err, want)
		}
	}
	// Again, as a check after serve would: the same, no error.
	if err := prepareV2(root, own, 4242); err != nil {
		t.Errorf("prepared twice: %v", err)
	}
}
