package sandbox

import (
	"fmt"
	"path/filepath"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/renderbox/renderbox/internal/wire"
)

// Limits bound one sandbox. The manager enforces Timeout and the output caps;
// the rest go into the OCI spec as cgroup limits, rlimits and mount options.
type Limits struct {
	// Timeout is the wall time from start to result, enforced by the host
	// (kill, then delete --force). Default 60s.
	Timeout time.Duration
	// MemoryBytes is the cgroup memory limit of the whole sandbox, the
	// user-space kernel included. Default 1 GiB.
	MemoryBytes int64
	// CPUs is the CPU quota in cores. Default 1.
	CPUs float64
	// Pids is the cgroup pids limit. It counts the sandbox's host threads and
	// processes (the Sentry's included), not only the renderer's. Default 512.
	Pids int64
	// TmpBytes caps the /tmp tmpfs, which holds the input, the scratch space
	// and the outputs. Default 256 MiB.
	TmpBytes int64
	// MaxOutputBytes and MaxOutputFiles cap what is read back. Defaults
	// 64 MiB and 1000 files.
	MaxOutputBytes int64
	MaxOutputFiles int
	// NoFile is RLIMIT_NOFILE inside. Default 1024.
	NoFile uint64
	// NProc is RLIMIT_NPROC inside: the tasks (threads and processes) the
	// renderer's uid may hold. gVisor enforces it with EAGAIN, a clean
	// failure inside the sandbox; the host's pids limit, hit first, would
	// end the whole sandbox instead. Default: what Pids leaves room for
	// (see tasksFor).
	NProc uint64
}

// WithDefaults fills zero fields with their defaults.
func (l Limits) WithDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if l.Timeout == 0 {
		l.Timeout = 60 * time.Second
	}
	def(&l.MemoryBytes, 1<<30)
	def(&l.Pids, 512)
	def(&l.TmpBytes, 256<<20)
	def(&l.MaxOutputBytes, 64<<20)
	if l.CPUs == 0 {
		l.CPUs = 1
	}
	if l.MaxOutputFiles == 0 {
		l.MaxOutputFiles = 1000
	}
	if l.NoFile == 0 {
		l.NoFile = 1024
	}
	if l.NProc == 0 {
		l.NProc = tasksFor(l.Pids)
	}
	return l
}

// sentryTasks is what tasksFor leaves for the host tasks a sandbox holds
// before its renderer starts any (the Sentry's threads, the gofer, the
// agent): measured about 30, doubled for margin.
const sentryTasks = 64

// tasksFor is the largest RLIMIT_NPROC whose every task fits under a host
// pids limit of pids: under systrap each sandboxed process costs two host
// tasks (measured: 400 sleeping processes held 832), so a renderer that
// exhausts its tasks hits EAGAIN before the host limit could end the
// sandbox.
func tasksFor(pids int64) uint64 {
	return uint64(max(16, (pids-sentryTasks)/2))
}

// SpecOptions is everything BuildSpec needs.
type SpecOptions struct {
	RootfsPath  string   // the shared renderer rootfs, mounted read-only
	RootfsImage string   // an EROFS image of RootfsPath, mounted as the root in its place
	Args        []string // the agent's argv
	UID, GID    uint32   // the agent's: non-root and not the renderer's (AgentUID)
	CgroupsPath string   // where runsc puts this sandbox's cgroups
	Limits      Limits
	// NoSwap caps the sandbox's memory+swap at its memory limit: no swap
	// at all. Only where the kernel accounts swap to cgroups
	// (SwapAccounting); runsc fails to create a sandbox otherwise.
	NoSwap bool
}

// AgentPath is where rootfs/build.sh installs the agent.
const AgentPath = "/usr/local/bin/renderbox-agent"

// AgentUID and AgentGID are what the agent runs as: neither root nor the
// renderer's (wire.RendererUID), so that a renderer cannot signal, trace or
// read it.
const (
	AgentUID = 65533
	AgentGID = 65533
)

// agentCaps are the agent's only capabilities: they let it start every
// renderer process as wire.RendererUID (CAP_SETUID, CAP_SETGID) and kill
// what it started (CAP_KILL: another uid's processes). They are in all five sets because
// gVisor, like Linux, leaves a non-root process only its ambient ones after
// the execve that starts it; the agent's first act empties its inheritable
// and ambient sets, so a renderer's execve leaves it none (noNewPrivileges;
// the rootfs has no file capabilities).
var agentCaps = []string{"CAP_KILL", "CAP_SETGID", "CAP_SETUID"}

// MaskFile is an empty file that rootfs/build.sh installs; it is mounted
// read-only over what a sandbox must not have (/dev/fuse, which gVisor's
// /dev always lists and a spec cannot remove).
const MaskFile = "/usr/share/renderbox/masked"

// sandboxOOMScoreAdj makes the host's OOM killer pick a sandbox (its
// Sentry and gofer) before the worker, the API or Redis.
const sandboxOOMScoreAdj = 1000

// BuildSpec returns the hardened OCI spec of one sandbox (docs/design.md, "A job
// in its sandbox"). Nothing in it comes from user input.
func BuildSpec(o SpecOptions) (*specs.Spec, error) {
	if o.UID == 0 || o.GID == 0 || o.UID == wire.RendererUID || o.GID == wire.RendererGID {
		return nil, fmt.Errorf("building spec: agent uid/gid %d/%d: neither root nor the renderer's (%d/%d)", o.UID, o.GID, wire.RendererUID, wire.RendererGID)
	}
	if o.RootfsPath == "" || o.CgroupsPath == "" || len(o.Args) == 0 {
		return nil, fmt.Errorf("building spec: rootfs, cgroups path and args are required")
	}
	l := o.Limits.WithDefaults()
	period := uint64(100_000)
	quota := int64(l.CPUs * float64(period))
	mem := l.MemoryBytes
	memory := &specs.LinuxMemory{Limit: &mem}
	if o.NoSwap {
		// OCI's Swap is memory+swap, as cgroup v1's memsw: runsc writes it
		// to memory.memsw.limit_in_bytes on v1, and their difference, 0,
		// to memory.swap.max on v2. Without it a sandbox at its memory
		// limit swaps out and goes on, up to all the host's swap.
		memory.Swap = &mem
	}
	oom := sandboxOOMScoreAdj
	var ann map[string]string
	if o.RootfsImage != "" {
		// gVisor's own mount of a root filesystem image: read-only,
		// inside the Sentry, from a descriptor runsc opens and donates.
		ann = map[string]string{"dev.gvisor.spec.rootfs.source": o.RootfsImage, "dev.gvisor.spec.rootfs.type": "erofs"}
	}
	return &specs.Spec{
		Annotations: ann,
		Version:     specs.Version,
		Hostname:    "renderbox",
		Root:        &specs.Root{Path: o.RootfsPath, Readonly: true},
		Process: &specs.Process{
			Terminal: false,
			User:     specs.User{UID: o.UID, GID: o.GID},
			Args:     o.Args,
			Env: []string{
				"PATH=/usr/local/bin:/usr/bin:/bin",
				"HOME=/tmp",
				"LANG=C.UTF-8",
			},
			Cwd: "/",
			// Every set spelled out: a nil one would let the runtime pick
			// its defaults.
			Capabilities: &specs.LinuxCapabilities{
				Bounding: agentCaps, Effective: agentCaps, Permitted: agentCaps,
				Inheritable: agentCaps, Ambient: agentCaps,
			},
			NoNewPrivileges: true,
			OOMScoreAdj:     &oom,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: l.NoFile, Soft: l.NoFile},
				{Type: "RLIMIT_NPROC", Hard: l.NProc, Soft: l.NProc},
				{Type: "RLIMIT_FSIZE", Hard: uint64(l.TmpBytes), Soft: uint64(l.TmpBytes)},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "strictatime", "mode=755", "size=65536k"}},
			// tmpfs defaults to half the host's RAM: always say size=.
			// Nothing written there runs.
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{
				"nosuid", "nodev", "noexec", "mode=1777", fmt.Sprintf("size=%d", l.TmpBytes),
			}},
			// gVisor mounts its own /sys when the spec has none: mask it
			// with an empty read-only tmpfs.
			{Destination: "/sys", Type: "tmpfs", Source: "tmpfs", Options: []string{"ro", "nosuid", "nodev", "noexec", "mode=555"}},
			{Destination: "/dev/fuse", Type: "bind", Source: filepath.Join(o.RootfsPath, MaskFile),
				Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: o.CgroupsPath,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.NetworkNamespace}, // empty: --network=none
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
			},
			Resources: &specs.LinuxResources{
				Memory: memory,
				CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
				Pids:   &specs.LinuxPids{Limit: &l.Pids},
			},
		},
	}, nil
}
