package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

const cgroupRoot = "/sys/fs/cgroup"

// unitCgroup makes the cgroup a service manager gives a unit with
// Delegate=yes, named unit, in the given v1 hierarchies (all of them on
// v2, where there is one), and returns its cgroup.procs files. When the
// test ends (after the processes the test started later are stopped) it
// is removed with whatever is left below it.
func unitCgroup(t *testing.T, unit string, hierarchies ...string) []string {
	t.Helper()
	var dirs []string
	if cgroupV2() {
		dirs = []string{filepath.Join(cgroupRoot, unit)}
	} else {
		for _, h := range hierarchies {
			dirs = append(dirs, filepath.Join(cgroupRoot, h, unit))
		}
	}
	var procs []string
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("making the unit's cgroup: %v", err)
		}
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	t.Cleanup(func() {
		// Every hierarchy: runsc makes the sandboxes' cgroups in those
		// the unit was not given too.
		for _, d := range sandbox.ParentCgroupDirs(unit) {
			if err := rmdirTree(d); err != nil {
				t.Errorf("removing the unit's cgroup: %v", err)
			}
		}
	})
	return procs
}

func rmdirTree(d string) error {
	ents, err := os.ReadDir(d)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := rmdirTree(filepath.Join(d, e.Name())); err != nil {
				return err
			}
		}
	}
	for i := 0; ; i++ {
		err := syscall.Rmdir(d)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if i == 50 {
			return fmt.Errorf("%s: %w", d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func cgroupV2() bool {
	var st syscall.Statfs_t
	return syscall.Statfs(cgroupRoot, &st) == nil && st.Type == 0x63677270
}

// hardening is how this test emulates each hardening directive the
// worker's unit holds (systemd is not PID 1 here): the worker runs a job
// under all of them at once. A directive the unit gains that is not here,
// nor in unitSettings, fails the test until it is emulated.
var hardening = map[string]string{
	// ProtectSystem=full: /usr, /boot, /efi and /etc read-only.
	"ProtectSystem=full": `mount -o bind,ro /usr /usr; mount -o bind,ro /etc /etc
for d in /boot /efi; do if [ -d $d ]; then mount -o bind,ro $d $d; fi; done`,
	// ProtectHome=yes: /home, /root and /run/user empty and inaccessible.
	"ProtectHome=yes": `for d in /home /root /run/user; do if [ -d $d ]; then mount -t tmpfs -o ro,mode=000 tmpfs $d; fi; done`,
	// PrivateTmp=yes: a /tmp and /var/tmp of its own.
	"PrivateTmp=yes": `mount -t tmpfs tmpfs /tmp; mount -t tmpfs tmpfs /var/tmp`,
	// ProtectKernelModules=yes: no CAP_SYS_MODULE, no module tree.
	"ProtectKernelModules=yes": `if [ -d /usr/lib/modules ]; then mount -t tmpfs -o ro,mode=000 tmpfs /usr/lib/modules; fi
caps=$caps,-sys_module`,
	// ProtectKernelLogs=yes: no CAP_SYSLOG, no /dev/kmsg.
	"ProtectKernelLogs=yes": `if [ -e /dev/kmsg ]; then mount -o bind /dev/null /dev/kmsg; fi
caps=$caps,-syslog`,
	// NoNewPrivileges=yes.
	"NoNewPrivileges=yes": `nnp=--no-new-privs`,
}

// unitSettings are the unit's directives that are not hardening.
var unitSettings = []string{"ExecStart", "Restart", "RestartSec", "KillSignal", "TimeoutStopSec",
	"RuntimeDirectory", "RuntimeDirectoryMode", "Environment", "EnvironmentFile", "LoadCredential",
	"Delegate", "TasksMax"}

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

// The worker's unit as deploy/ ships it: systemd-analyze finds nothing to
// say about it; run as it runs the worker (its cgroup delegated,
// -cgroup-parent delegated, every hardening directive in force), the
// worker keeps its sandboxes inside its own cgroup with each job's limits,
// runs a job, and leaves nothing there when it stops. One whose cgroups
// were not delegated refuses to start, saying so.
func TestWorkerRunsAsItsUnitRunsIt(t *testing.T) {
	unitFile := filepath.Join("..", "..", "deploy", "systemd", "renderbox-worker.service")
	verifyUnit(t, unitFile)
	var script []string
	delegated := false
	for _, d := range serviceSection(t, unitFile) {
		name, _, _ := strings.Cut(d, "=")
		switch {
		case d == "Delegate=yes":
			delegated = true
		case name == "ExecStart" && !strings.Contains(d, "-cgroup-parent delegated"):
			t.Errorf("the unit's ExecStart does not keep the sandboxes in its cgroup (-cgroup-parent delegated): %s", d)
		case hardening[d] != "":
			script = append(script, hardening[d])
		case !slices.Contains(unitSettings, name):
			t.Errorf("the unit has %s, which this test does not emulate: add it to hardening (or, if it is not hardening, to unitSettings)", d)
		}
	}
	if !delegated {
		t.Fatal("the worker's unit does not delegate its cgroup (Delegate=yes)")
	}

	unit := fmt.Sprintf("rbx-e2e-%d.service", os.Getpid())
	procs := unitCgroup(t, unit, "memory", "cpu", "cpuacct", "pids", "systemd")
	if !cgroupV2() {
		// Only the memory controller moved: systemd without Delegate=yes
		// leaves a unit's other controllers where they were.
		half := unitCgroup(t, unit+"-half", "memory")
		cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, half[0], filepath.Join(bins, "worker"),
			"check", "-state-dir", t.TempDir(), "-rootfs", testenv.RootfsTree(t), "-cgroup-parent", "delegated")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Delegate=yes") || !strings.Contains(string(out), "nothing was delegated") {
			t.Errorf("worker check in undelegated cgroups: %v\n%s\nwant a refusal naming Delegate=yes", err, out)
		}
	}

	// The binary where PrivateTmp and ProtectHome do not hide it.
	binDir, err := os.MkdirTemp("/run", "rbx-e2e-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	worker := filepath.Join(binDir, "worker")
	if out, err := exec.Command("cp", filepath.Join(bins, "worker"), worker).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Into the unit's cgroup, then a mount namespace of its own with the
	// hardening, then the worker.
	const enter = `for f in $0; do echo $$ > "$f" || exit 97; done; exec unshare --mount --propagation private /bin/sh -c "$RBX_HARDENING"' && exec setpriv $nnp --bounding-set "${caps#,}" -- "$@"' sh "$@"`
	hard := "set -e\ncaps=\n" + strings.Join(script, "\n")
	s := newStack(t, stackOpts{
		workerArgs: []string{"-cgroup-parent", "delegated"},
		workerCmd: func(_ string, args []string) *exec.Cmd {
			cmd := exec.Command("/bin/sh", append([]string{"-c", enter, strings.Join(procs, " "), worker}, args...)...)
			cmd.Env = append(os.Environ(), "RBX_HARDENING="+hard)
			return cmd
		},
	})
	var ready struct {
		CgroupParent string `json:"cgroup_parent"`
	}
	s.worker.waitLog(t, "worker ready", &ready)
	parent := unit + "/sandboxes"
	if ready.CgroupParent != parent {
		t.Fatalf("the worker's sandboxes go to %q, want %q", ready.CgroupParent, parent)
	}
	pid := s.worker.cmd.Process.Pid
	own, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(own), ":/"+unit+"\n") && !strings.Contains(string(own), ":/"+unit+"/supervisor\n") {
		t.Errorf("the worker is not in its unit's cgroup:\n%s", own)
	}
	// The hardening is in force on the worker itself.
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if len(script) > 0 && !strings.Contains(string(status), "NoNewPrivs:\t1") {
		t.Errorf("the worker runs without no_new_privs:\n%s", status)
	}
	if mounts, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", pid)); !strings.Contains(string(mounts), " /usr ") || !strings.Contains(string(mounts), " /tmp tmpfs ") {
		t.Errorf("the worker's mounts lack the hardening's /usr and /tmp:\n%s", mounts)
	}

	c, key := s.client, s.key("delegated")
	_, j := submitJSON(t, c, key, "html-pdf", samples.HTML("Delegated", "a job inside the unit"), map[string]any{"wait_delay": 3}, "", nil)
	// The sandboxes' own limits are on their cgroups there: the job's, or
	// a pool sandbox's while the pool fills. A cgroup can go between the
	// listing and the read (a checkpoint template, a sandbox just used),
	// so read the first one that is still there.
	limits := func(sb string) []string {
		if cgroupV2() {
			return []string{filepath.Join(cgroupRoot, parent, sb, "memory.max"), filepath.Join(cgroupRoot, parent, sb, "pids.max")}
		}
		return []string{filepath.Join(cgroupRoot, "memory", parent, sb, "memory.limit_in_bytes"), filepath.Join(cgroupRoot, "pids", parent, sb, "pids.max")}
	}
	values := map[string]string{}
	waitFor(t, "a sandbox in the unit's cgroup", 60*time.Second, func() bool {
		for _, cg := range sandbox.LeftoverCgroups("/" + parent) {
			clear(values)
			for _, f := range limits(filepath.Base(cg)) {
				if b, err := os.ReadFile(f); err == nil {
					values[f] = strings.TrimSpace(string(b))
				}
			}
			if len(values) == 2 {
				return true
			}
		}
		return false
	})
	for f, v := range values {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 || n >= 1<<62 {
			t.Errorf("%s is %q, want the sandbox's limit", f, v)
		}
	}
	j = getJob(t, c, key, j.ID, "?wait=60")
	if j.State != "succeeded" {
		t.Fatalf("the job inside the unit is %s %+v, want succeeded", j.State, j.Error)
	}

	// Stopped, the worker leaves nothing in its cgroup.
	if err := s.worker.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.worker.cmd.Wait(); err != nil {
		t.Errorf("the worker exited with %v after SIGTERM", err)
	}
	if left := sandbox.LeftoverCgroups("/" + parent); len(left) != 0 {
		t.Errorf("the stopped worker left cgroups in its unit: %v", left)
	}
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
