//go:build !unit

package e2e

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

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

// emulation is how this test runs a program as the worker's unit runs it
// (systemd is not PID 1 here): in a mount namespace of its own (unshare),
// a script sets up what the unit's directives ask, then setpriv runs it
// with the unit's bounding set and no_new_privs, through this test binary
// (restrictFamilies) for RestrictAddressFamilies.
type emulation struct {
	nnp                                  bool
	caps                                 []string // setpriv --bounding-set items
	strict, full                         bool     // ProtectSystem
	writable                             []string // ReadWritePaths
	hidden                               []string // InaccessiblePaths ("-" kept)
	home, privateTmp, modules, kernelLog bool
	runtimeDir, runtimeMode              string
	families                             []string // RestrictAddressFamilies
}

// emulated are the unit's directives this test emulates, each read into
// an emulation; a value it cannot emulate is an error. A directive the
// unit gains that is not here, nor in unitSettings, fails the test until
// it is emulated.
var emulated = map[string]func(e *emulation, v string) error{
	"NoNewPrivileges": func(e *emulation, v string) error { e.nnp = true; return want(v, "yes") },
	// full: /usr, /boot, /efi and /etc read-only. strict: every mount
	// but the API file systems (/proc, /sys, /dev) and the writable paths.
	"ProtectSystem": func(e *emulation, v string) error {
		e.full, e.strict = v == "full", v == "strict"
		return want(v, "full", "strict")
	},
	"ReadWritePaths": func(e *emulation, v string) error { e.writable = append(e.writable, strings.Fields(v)...); return nil },
	// systemd mounts an empty node of mode 000 over each: root, whose
	// CAP_DAC_OVERRIDE passes mode 000, still finds nothing in it.
	"InaccessiblePaths": func(e *emulation, v string) error { e.hidden = append(e.hidden, strings.Fields(v)...); return nil },
	// /home, /root and /run/user empty and inaccessible.
	"ProtectHome": func(e *emulation, v string) error { e.home = true; return want(v, "yes") },
	// A /tmp and /var/tmp of its own.
	"PrivateTmp": func(e *emulation, v string) error { e.privateTmp = true; return want(v, "yes") },
	// No CAP_SYS_MODULE, no module tree.
	"ProtectKernelModules": func(e *emulation, v string) error { e.modules = true; return want(v, "yes") },
	// No CAP_SYSLOG, no /dev/kmsg.
	"ProtectKernelLogs": func(e *emulation, v string) error { e.kernelLog = true; return want(v, "yes") },
	"CapabilityBoundingSet": func(e *emulation, v string) error {
		e.caps = []string{"-all"}
		for _, c := range strings.Fields(v) {
			if !strings.HasPrefix(c, "CAP_") {
				return fmt.Errorf("%q is not a capability this test reads (an allow-list of CAP_ names)", c)
			}
			e.caps = append(e.caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
		}
		return nil
	},
	"RestrictAddressFamilies": func(e *emulation, v string) error {
		e.families = strings.Fields(v)
		for _, f := range e.families {
			if _, ok := familyNumbers[f]; !ok {
				return fmt.Errorf("%q is not an address family this test knows (an allow-list of %v)", f, slices.Sorted(maps.Keys(familyNumbers)))
			}
		}
		return nil
	},
	// /run/<name>, the worker's state dir, private to the unit; like
	// ReadWritePaths, writable under ProtectSystem=strict.
	"RuntimeDirectory":     func(e *emulation, v string) error { e.runtimeDir = v; return nil },
	"RuntimeDirectoryMode": func(e *emulation, v string) error { e.runtimeMode = v; return nil },
}

func want(v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return fmt.Errorf("this test emulates only %v", allowed)
	}
	return nil
}

// unitSettings are the unit's directives that are not hardening.
var unitSettings = []string{"ExecStart", "Restart", "RestartSec", "KillSignal", "TimeoutStopSec",
	"Environment", "EnvironmentFile", "LoadCredential", "Delegate", "TasksMax"}

// emulate reads the unit's [Service] directives into an emulation.
func emulate(directives []string) (emulation, error) {
	var e emulation
	for _, d := range directives {
		name, v, _ := strings.Cut(d, "=")
		f := emulated[name]
		switch {
		case f != nil:
			if err := f(&e, v); err != nil {
				return e, fmt.Errorf("%s: %w", d, err)
			}
		case !slices.Contains(unitSettings, name):
			return e, fmt.Errorf("the unit has %s, which this test does not emulate: add it to emulated (or, if it is not hardening, to unitSettings)", d)
		}
	}
	return e, nil
}

// script is the shell script that sets the emulation up in the mount
// namespace it runs in, then runs "$@" through setpriv.
func (e emulation) script() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("set -e")
	var writable []string
	if e.runtimeDir != "" {
		d := "/run/" + e.runtimeDir
		line("mkdir -p %s; mount -t tmpfs -o mode=%s tmpfs %s", d, cmp.Or(e.runtimeMode, "0755"), d)
		writable = append(writable, d)
	}
	if e.privateTmp {
		line("mount -t tmpfs tmpfs /tmp; mount -t tmpfs tmpfs /var/tmp")
		writable = append(writable, "/tmp", "/var/tmp")
	}
	if e.home {
		line("for d in /home /root /run/user; do if [ -d $d ]; then mount -t tmpfs -o ro,mode=000 tmpfs $d; fi; done")
	}
	caps := slices.Clone(e.caps)
	if e.modules {
		line("if [ -d /usr/lib/modules ]; then mount -t tmpfs -o ro,mode=000 tmpfs /usr/lib/modules; fi")
		caps = append(caps, "-sys_module")
	}
	if e.kernelLog {
		line("if [ -e /dev/kmsg ]; then mount -o bind /dev/null /dev/kmsg; fi")
		caps = append(caps, "-syslog")
	}
	if len(e.hidden) > 0 {
		line(`empty=$(mktemp); chmod 000 "$empty"`)
	}
	for _, p := range e.hidden {
		path, optional := strings.CutPrefix(p, "-")
		missing := "echo 'InaccessiblePaths: " + path + " does not exist' >&2; exit 1"
		if optional {
			missing = ":"
		}
		line(`if [ -d %[1]s ]; then mount -t tmpfs -o ro,mode=000 tmpfs %[1]s; elif [ -e %[1]s ]; then mount --bind -o ro "$empty" %[1]s; else %[2]s; fi`, path, missing)
	}
	if e.full {
		line("mount -o bind,ro /usr /usr; mount -o bind,ro /etc /etc")
		line("for d in /boot /efi; do if [ -d $d ]; then mount -o bind,ro $d $d; fi; done")
	}
	for _, p := range e.writable {
		line("mount --bind %s %s", p, p)
		writable = append(writable, p)
	}
	if e.strict {
		// Every mount read-only but the API file systems and the writable
		// paths (and what is below them); one hidden below another mount
		// has no path to remount by.
		line("rw='%s'", strings.Join(writable, " "))
		line(`for m in $(awk '{print $5}' /proc/self/mountinfo); do
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue;; esac
  skip=; for p in $rw; do case "$m" in "$p"|"$p"/*) skip=1;; esac; done
  if [ -z "$skip" ] && [ -e "$m" ]; then mount -o remount,bind,ro "$m"; fi
done`)
	}
	nnp := ""
	if e.nnp {
		nnp = "--no-new-privs"
	}
	bounding := ""
	if len(caps) > 0 {
		bounding = "--bounding-set " + strings.Join(caps, ",")
	}
	families := ""
	if e.families != nil {
		families = familiesEnv + "=" + strings.Join(e.families, ",")
	}
	line(`exec env %s setpriv %s %s -- "$@"`, families, nnp, bounding)
	return b.String()
}

// command returns the command that runs argv as the unit runs its
// ExecStart: in the unit's cgroup (procs, its cgroup.procs files), then
// the emulation, through helper (a copy of this test binary, for
// RestrictAddressFamilies) when the unit restricts address families.
func (e emulation) command(procs []string, helper string, argv ...string) *exec.Cmd {
	const enter = `for f in $0; do echo $$ > "$f" || exit 97; done; exec unshare --mount --propagation private /bin/sh -c "$RBX_EMULATION" sh "$@"`
	if e.families != nil {
		argv = append([]string{helper}, argv...)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", enter, strings.Join(procs, " ")}, argv...)...)
	cmd.Env = append(os.Environ(), "RBX_EMULATION="+e.script())
	return cmd
}

// familiesEnv names, for this test binary run as the helper, the address
// families socket(2) may create.
const familiesEnv = "RBX_E2E_ADDRESS_FAMILIES"

var familyNumbers = map[string]uint32{"AF_UNIX": unix.AF_UNIX, "AF_INET": unix.AF_INET, "AF_INET6": unix.AF_INET6, "AF_NETLINK": unix.AF_NETLINK, "AF_PACKET": unix.AF_PACKET}

// restrictFamilies is RestrictAddressFamilies= as systemd makes it: a
// seccomp filter under which socket(2) fails with EAFNOSUPPORT for any
// other family (socketpair and other ABIs are not filtered). It then
// executes argv in place of this process.
func restrictFamilies(families string, argv []string) {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "restricting address families: %v\n", err)
		os.Exit(96)
	}
	arch := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if arch == 0 || len(argv) == 0 {
		fail(fmt.Errorf("only on amd64 and arm64, with a command to run"))
	}
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	allow := stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW)
	deny := stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(unix.EAFNOSUPPORT))
	var allowed []uint32
	for _, f := range strings.Split(families, ",") {
		allowed = append(allowed, familyNumbers[f])
	}
	// seccomp_data: nr at 0, arch at 4, args[0] (its low half) at 16.
	prog := []unix.SockFilter{
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, 4), jeq(arch, 1, 0), allow,
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, 0), jeq(unix.SYS_SOCKET, 1, 0), allow,
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, 16),
	}
	for i, f := range allowed {
		prog = append(prog, jeq(f, uint8(len(allowed)-i), 0))
	}
	prog = append(prog, deny, allow)
	runtime.LockOSThread() // the filter is this thread's, which then executes argv
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fp)), 0, 0); err != nil {
		fail(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, familiesEnv+"=") })
	fail(syscall.Exec(argv[0], argv, env))
}

// capNames are the capabilities by number, as CapBnd's bits count them.
var capNames = strings.Fields(`chown dac_override dac_read_search fowner fsetid kill setgid setuid setpcap
	linux_immutable net_bind_service net_broadcast net_admin net_raw ipc_lock ipc_owner sys_module sys_rawio
	sys_chroot sys_ptrace sys_pacct sys_admin sys_boot sys_nice sys_resource sys_time sys_tty_config mknod
	lease audit_write audit_control setfcap mac_override mac_admin syslog wake_alarm block_suspend audit_read
	perfmon bpf checkpoint_restore`)

// The worker's unit as deploy/ ships it: systemd-analyze finds nothing to
// say about it; run as it runs the worker (its cgroup delegated,
// -cgroup-parent delegated, its state dir the unit's runtime directory,
// every hardening directive in force), the worker keeps its sandboxes
// inside its own cgroup with each job's limits, runs a job, sees nothing
// of the paths the unit hides, writes nothing outside its own, and leaves
// nothing in its cgroup when it stops. One whose cgroups were not
// delegated refuses to start, saying so; so does one without a capability
// or an address family the unit keeps for runsc, or whose state dir is
// outside the paths the unit lets it write.
func TestWorkerRunsAsItsUnitRunsIt(t *testing.T) {
	unitFile := filepath.Join("..", "..", "deploy", "systemd", "renderbox-worker.service")
	verifyUnit(t, unitFile)
	directives := serviceSection(t, unitFile)
	if !slices.Contains(directives, "Delegate=yes") {
		t.Fatal("the worker's unit does not delegate its cgroup (Delegate=yes)")
	}
	for _, d := range directives {
		if strings.HasPrefix(d, "ExecStart=") && !strings.Contains(d, "-cgroup-parent delegated") {
			t.Errorf("the unit's ExecStart does not keep the sandboxes in its cgroup (-cgroup-parent delegated): %s", d)
		}
	}
	e, err := emulate(directives)
	if err != nil {
		t.Fatal(err)
	}
	if e.runtimeDir == "" || !e.strict {
		t.Fatalf("the unit has no RuntimeDirectory= or no ProtectSystem=strict: %+v", e)
	}
	stateDir := "/run/" + e.runtimeDir + "/worker" // the worker's default

	unit := fmt.Sprintf("rbx-e2e-%d.service", os.Getpid())
	hierarchies := []string{"memory", "cpu", "cpuacct", "pids", "systemd"}
	procs := unitCgroup(t, unit, hierarchies...)
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

	// The binaries where PrivateTmp and ProtectHome do not hide them: the
	// worker, and this test's own, which restricts address families.
	binDir, err := os.MkdirTemp("/run", "rbx-e2e-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	worker, helper := filepath.Join(binDir, "worker"), filepath.Join(binDir, "e2e.test")
	for src, dst := range map[string]string{filepath.Join(bins, "worker"): worker, self: helper} {
		if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}

	// worker check under the unit: the self-test of a cold, a pre-booted
	// and a restored sandbox (its checkpoint image in the state dir). Not
	// vacuous: without what the unit keeps for runsc, the worker refuses
	// to start.
	check := []string{worker, "check", "-rootfs", testenv.RootfsTree(t), "-cgroup-parent", "delegated"}
	for i, tc := range []struct {
		name       string
		directives []string
		stateDir   string
		want       string // "" for a pass; else a regexp the refusal matches
	}{
		{"as the unit runs it", directives, stateDir, ""},
		{"without CAP_SYS_CHROOT", without(directives, "CapabilityBoundingSet", "CAP_SYS_CHROOT"), stateDir, "runsc (create|start)"},
		{"without AF_UNIX", without(directives, "RestrictAddressFamilies", "AF_UNIX"), stateDir, "failed to create control socket"},
		{"with the state dir outside ReadWritePaths", directives, "/run/" + e.runtimeDir + "-elsewhere/worker", "read-only file system"},
	} {
		less, err := emulate(tc.directives)
		if err != nil {
			t.Fatal(err)
		}
		procs := unitCgroup(t, fmt.Sprintf("%s-%d", unit, i), hierarchies...)
		out, err := less.command(procs, helper, append(check, "-state-dir", tc.stateDir)...).CombinedOutput()
		switch {
		case tc.want == "" && (err != nil || !strings.Contains(string(out), "PASS  no swap (restored)") || !strings.Contains(string(out), "worker: ready")):
			t.Errorf("worker check %s: %v\n%s\nwant it ready, a restored sandbox checked", tc.name, err, tailStr(string(out), 3000))
		case tc.want != "" && (err == nil || !strings.Contains(string(out), "refusing to start") || !regexp.MustCompile(tc.want).MatchString(strings.ToLower(string(out)))):
			t.Errorf("worker check %s: %v\n%s\nwant a refusal with %q", tc.name, err, tailStr(string(out), 3000), tc.want)
		}
	}

	// A file the unit hides, planted for this test.
	hidden := ""
	for _, p := range e.hidden {
		if d := strings.TrimPrefix(p, "-"); hidden == "" && isDir(d) {
			hidden = filepath.Join(d, fmt.Sprintf("rbx-e2e-%d", os.Getpid()))
		}
	}
	if hidden == "" {
		t.Fatalf("none of the unit's InaccessiblePaths %v is a directory on this host: nothing to plant a file in", e.hidden)
	}
	if err := os.WriteFile(hidden, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hidden) })

	s := newStack(t, stackOpts{
		workerArgs: []string{"-cgroup-parent", "delegated", "-state-dir", stateDir},
		workerCmd: func(_ string, args []string) *exec.Cmd {
			return e.command(procs, helper, append([]string{worker}, args...)...)
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
	// The hardening is in force on the worker itself: no_new_privs, the
	// bounding set, the seccomp filter, and its view of the file system
	// (read through /proc/<pid>/root, which is its mount namespace).
	if v := statusField(t, pid, "NoNewPrivs"); v != "1" {
		t.Errorf("the worker runs with NoNewPrivs %s, want 1", v)
	}
	wantCaps := slices.DeleteFunc(slices.Clone(e.caps[1:]), func(c string) bool { return c == "+sys_module" || c == "+syslog" })
	slices.Sort(wantCaps)
	if got := capSet(statusField(t, pid, "CapBnd")); !slices.Equal(slices.Sorted(slices.Values(got)), wantCaps) {
		t.Errorf("the worker's bounding set is %v, want the unit's %v", got, wantCaps)
	}
	if v := statusField(t, pid, "Seccomp_filters"); v == "0" {
		t.Error("the worker runs without the address families' seccomp filter")
	}
	root := fmt.Sprintf("/proc/%d/root", pid)
	if _, err := os.Stat(filepath.Join(root, hidden)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worker sees %s, which its unit hides: %v", hidden, err)
	}
	if _, err := os.Stat(filepath.Join(root, stateDir, "lock")); err != nil {
		t.Errorf("the worker's state dir is not in its runtime directory: %v", err)
	}
	for _, d := range []string{"/var/lib/renderbox", "/etc", "/run"} {
		f := filepath.Join(root, d, fmt.Sprintf("rbx-e2e-%d", os.Getpid()))
		if err := os.WriteFile(f, nil, 0o600); !errors.Is(err, syscall.EROFS) {
			os.Remove(f)
			t.Errorf("writing %s in the worker's view: %v, want a read-only file system", d, err)
		}
	}

	c, key := s.client, s.key("delegated")
	_, j := submitJSON(t, c, key, "html-pdf", samples.HTML("Delegated", "a job inside the unit"), map[string]any{"wait_delay": 3}, "", nil)
	// The sandboxes' own limits are on their cgroups there: the job's, or
	// a pool sandbox's while the pool fills, no swap past the memory
	// limit. A cgroup can go between the listing and the read (a
	// checkpoint template, a sandbox just used), so read the first one
	// that is still there.
	limits := func(sb string) []string {
		if cgroupV2() {
			return []string{filepath.Join(cgroupRoot, parent, sb, "memory.max"), filepath.Join(cgroupRoot, parent, sb, "pids.max"),
				filepath.Join(cgroupRoot, parent, sb, "memory.swap.max")}
		}
		return []string{filepath.Join(cgroupRoot, "memory", parent, sb, "memory.limit_in_bytes"), filepath.Join(cgroupRoot, "pids", parent, sb, "pids.max"),
			filepath.Join(cgroupRoot, "memory", parent, sb, "memory.memsw.limit_in_bytes")}
	}
	var values []string
	waitFor(t, "a sandbox in the unit's cgroup", 60*time.Second, func() bool {
		for _, cg := range sandbox.LeftoverCgroups("/" + parent) {
			values = values[:0]
			for _, f := range limits(filepath.Base(cg)) {
				if b, err := os.ReadFile(f); err == nil {
					values = append(values, strings.TrimSpace(string(b)))
				}
			}
			if len(values) == 3 {
				return true
			}
		}
		return false
	})
	for i, v := range values[:2] {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 || n >= 1<<62 {
			t.Errorf("%s is %q, want the sandbox's limit", limits("<sandbox>")[i], v)
		}
	}
	if swap := values[2]; swap != "0" && swap != values[0] {
		t.Errorf("the sandbox's swap limit is %s (memory %s): want no swap past its memory limit", swap, values[0])
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
