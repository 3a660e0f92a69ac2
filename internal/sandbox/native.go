package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The native runtime is a benchmark floor, never a sandbox: the same
// bundle's agent, argv, environment, uids, capabilities and rlimits, in
// the same cgroup with the same limits, run on the host kernel without
// gVisor — a chroot of the same rootfs tree (bound read-only), a fresh
// tmpfs /tmp of the spec's size, its own mount, pid, network, IPC and UTS
// namespaces. A document rendered this way can reach the host kernel with
// every system call it makes; docs/security.md says it is never for
// untrusted input. It exists so that `make bench` can measure what the
// sandbox costs against the same renderer warm on the host
// (docs/benchmarks.md), through the same pool and job path: only how a
// sandbox's process is made and ended differs (Create, Start, Kill,
// Destroy), and the pool cannot tell.

// UseUnsafeNative makes every sandbox the manager makes from now on a
// native process without gVisor (the unsafe benchmark floor above). Call
// it before any sandbox or pool is made, and only for `worker serve
// -unsafe-native-bench`; there is no way back.
func (m *Manager) UseUnsafeNative() {
	m.log.Warn("UNSAFE: sandboxes run natively, WITHOUT gVisor: a benchmark floor, never for untrusted input (docs/security.md)")
	m.native = true
}

// Native reports whether the manager's sandboxes run natively, without
// gVisor (UseUnsafeNative).
func (m *Manager) Native() bool { return m.native }

// nativeScript makes the mounts of the spec in a fresh mount namespace
// (unshare's, private) and execs the rest of its arguments. $1 is the
// rootfs tree, $2 the /tmp size in bytes, then the cgroup.procs files the
// process joins before anything else, up to "--". The /dev nodes are those
// gVisor provides (Chromium spins without /dev/urandom).
const nativeScript = `set -e
r=$1; tmp=$2; shift 2
while [ "$1" != -- ]; do echo $$ > "$1"; shift; done; shift
mount --bind "$r" "$r"
mount -o remount,bind,ro "$r"
mount -t tmpfs -o "size=$tmp,nosuid,nodev,noexec,mode=1777" tmpfs "$r/tmp"
mount -t proc -o nosuid,noexec,nodev proc "$r/proc"
mount -t tmpfs -o nosuid,noexec,mode=755,size=64k tmpfs "$r/dev"
for d in null zero full random urandom; do touch "$r/dev/$d"; mount --bind "/dev/$d" "$r/dev/$d"; done
mount -t tmpfs -o ro,nosuid,nodev,noexec,mode=555,size=4k tmpfs "$r/sys"
exec "$@"`

// nativeCommand is the host command that runs the process of spec
// natively in tree, its tasks in the cgroup directories dirs.
func nativeCommand(spec *specs.Spec, tree string, dirs []string) ([]string, error) {
	p := spec.Process
	if p == nil || len(p.Args) == 0 || p.User.UID == 0 {
		return nil, fmt.Errorf("native: the spec has no process, or one run as root")
	}
	tmp := ""
	for _, mnt := range spec.Mounts {
		if mnt.Destination != "/tmp" {
			continue
		}
		for _, o := range mnt.Options {
			if v, ok := strings.CutPrefix(o, "size="); ok {
				tmp = v
			}
		}
	}
	if tmp == "" {
		return nil, fmt.Errorf("native: the spec has no /tmp size")
	}
	args := []string{"unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
		"--net", "--ipc", "--uts", "--", "sh", "-c", nativeScript, "sh", tree, tmp}
	for _, d := range dirs {
		args = append(args, filepath.Join(d, "cgroup.procs"))
	}
	args = append(args, "--", "prlimit")
	for _, r := range p.Rlimits {
		name := strings.ToLower(strings.TrimPrefix(r.Type, "RLIMIT_"))
		if name == "nproc" {
			// gVisor counts RLIMIT_NPROC per sandbox, the host kernel
			// per uid across the host: every native sandbox's renderers
			// would share one count (four booted Chromiums left a pdf
			// sandbox unable to start pdftoppm). The worker's own stays
			// (raising it takes CAP_SYS_RESOURCE); the cgroup's pids
			// limit still bounds each sandbox's tasks.
			continue
		}
		args = append(args, fmt.Sprintf("--%s=%d:%d", name, r.Soft, r.Hard))
	}
	var caps []string
	if c := p.Capabilities; c != nil {
		for _, name := range c.Ambient {
			caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(name, "CAP_")))
		}
	}
	set := strings.Join(caps, ",")
	uid, gid := strconv.Itoa(int(p.User.UID)), strconv.Itoa(int(p.User.GID))
	args = append(args, "--", "chroot", tree, "/usr/bin/setpriv", "--reuid="+uid, "--regid="+gid, "--clear-groups",
		"--inh-caps=-all,"+set, "--ambient-caps="+set, "--bounding-set=-all,"+set)
	if p.NoNewPrivileges {
		args = append(args, "--no-new-privs")
	}
	args = append(args, "/usr/bin/env", "-i")
	args = append(args, p.Env...)
	return append(args, p.Args...), nil
}

// nativeCreate starts the bundle's process natively (nativeCommand) with
// the given stdio, in the sandbox's own cgroup made with its limits, and
// writes its host pid to pidFile as `runsc create` does. The process runs
// at once: a native sandbox has no created-but-not-started state.
func (s *Sandbox) nativeCreate(ctx context.Context, pidFile string, in, out, errw *os.File) error {
	b, err := os.ReadFile(filepath.Join(s.bundle, "config.json"))
	if err != nil {
		return err
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("native: reading the spec: %w", err)
	}
	var dirs []string
	for _, d := range cgroupDirs(s.cgroup) {
		// A new cpuset takes no task until its cpus and mems are written;
		// the sandbox's spec leaves them to the parent's anyway.
		if !strings.Contains(d, "/cpuset/") {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("native: making the cgroup: %w", err)
		}
	}
	// Written with the memory limit first: memory+swap may never be below it.
	if err := lowerCgroup(s.cgroup, s.Limits, s.noSwap); err != nil {
		return fmt.Errorf("native: limiting the cgroup: %w", err)
	}
	argv, err := nativeCommand(&spec, s.native, dirs)
	if err != nil {
		return err
	}
	// Not CommandContext: the process outlives the call that makes it,
	// as a runsc-made sandbox does, and is ended by Kill and Destroy.
	cmd := exec.Command(argv[0], argv[1:]...)
	stdio(cmd, in, out, errw)
	// Its own process group, so that a signal to the worker's group
	// does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("native: %w", err)
	}
	pid := cmd.Process.Pid
	// The subreaper waits for it by pid (adopt.go); os/exec never will.
	_ = cmd.Process.Release()
	return os.WriteFile(pidFile, []byte(strconv.Itoa(pid)), 0o600)
}

// nativeKill kills every process of a native sandbox: its cgroup's
// tasks (the agent is its pid namespace's init, so the rest go with it)
// and unshare.
func (s *Sandbox) nativeKill() {
	for _, d := range cgroupDirs(s.cgroup) {
		killProcs(d)
	}
	if s.exit != nil {
		s.exit.signal(syscall.SIGKILL)
	}
}
