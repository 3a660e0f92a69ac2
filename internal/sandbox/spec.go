package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// Limits bound one sandbox (jobspec.Limits: the catalogue names them
// without linking this package).
type Limits = jobspec.Limits

// SpecOptions is everything BuildSpec needs.
type SpecOptions struct {
	RootfsPath  string   // the shared renderer rootfs, mounted read-only
	RootfsImage string   // an EROFS image of RootfsPath, mounted as the root in its place
	Args        []string // the agent's argv
	UID, GID    uint32   // the agent's: non-root and not the renderer's (AgentUID)
	CgroupsPath string   // where runsc puts this sandbox's cgroups
	Limits      Limits   // resolved (Limits.WithDefaults)
	// NoSwap caps the sandbox's memory+swap at its memory limit: no swap
	// at all. Only where the kernel accounts swap to cgroups
	// (SwapAccounting); runsc fails to create a sandbox otherwise.
	NoSwap bool
	// BootCPUs, when above Limits.CPUs, is the CPU quota the sandbox is
	// made with: runsc create (or restore), its gofer and its Sentry
	// boot in the sandbox's cgroup, and their burst of CPU at a 1-CPU
	// quota was throttled for a whole CFS period (80–120 ms of every
	// cold sandbox). Its owner lowers the quota to Limits.CPUs before
	// the first request reaches the agent (Sandbox.ExchangeWith).
	BootCPUs float64
}

// AgentPath is where rootfs/build.sh installs the agent.
const AgentPath = jobspec.AgentPath

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

// CheckMaskFile checks rootfs's MaskFile as rootfs/build.sh installs it:
// an empty regular file, 0444 and root's, under directories (no symlink)
// that are root's and that no one else may write. With the rootfs image
// it is the one file of the tree a sandbox opens (its gofer, for the
// mount), so the worker checks it where it does not digest the tree.
func CheckMaskFile(rootfs string) error {
	mask := filepath.Join(rootfs, MaskFile)
	p := rootfs
	for _, name := range strings.Split(strings.TrimPrefix(MaskFile, "/"), "/") {
		p = filepath.Join(p, name)
		st, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("the mask file: %w", err)
		}
		sys, _ := st.Sys().(*syscall.Stat_t)
		mode := st.Mode()
		switch {
		case sys == nil || sys.Uid != 0 || sys.Gid != 0:
			return fmt.Errorf("the mask file: %s is not root's", p)
		case p != mask && (!mode.IsDir() || mode.Perm()&0o022 != 0):
			return fmt.Errorf("the mask file: %s is %s, want a directory only root may write", p, mode)
		case p == mask && (!mode.IsRegular() || mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0o444 || st.Size() != 0):
			return fmt.Errorf("the mask file: %s is %s of %d bytes, want an empty -r--r--r-- file (make rootfs installs it)", p, mode, st.Size())
		}
	}
	return nil
}

// sandboxOOMScoreAdj makes the host's OOM killer pick a sandbox (its
// Sentry and gofer) before the worker, the API or Redis.
const sandboxOOMScoreAdj = 1000

// BuildSpec returns the hardened OCI spec of one sandbox
// (TestBuildSpecIsHardened lists what it holds). Nothing in it comes from
// user input.
func BuildSpec(o SpecOptions) (*specs.Spec, error) {
	if o.UID == 0 || o.GID == 0 || o.UID == wire.RendererUID || o.GID == wire.RendererGID {
		return nil, fmt.Errorf("building spec: agent uid/gid %d/%d: neither root nor the renderer's (%d/%d)", o.UID, o.GID, wire.RendererUID, wire.RendererGID)
	}
	if o.RootfsPath == "" || o.CgroupsPath == "" || len(o.Args) == 0 {
		return nil, fmt.Errorf("building spec: rootfs, cgroups path and args are required")
	}
	l := o.Limits
	period := uint64(100_000)
	quota := int64(max(l.CPUs, o.BootCPUs) * float64(period))
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
