package sandbox

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/renderbox/renderbox/internal/testenv/exe"
	"github.com/renderbox/renderbox/internal/wire"
)

func TestGlobalArgs(t *testing.T) {
	t.Parallel()
	r := &Runsc{Path: "/usr/local/bin/runsc", Root: "/run/x/runsc", Platform: "systrap"}
	got := r.globalArgs()
	want := []string{"--root=/run/x/runsc", "--network=none", "--platform=systrap", "--directfs=false", "--systrap-disable-fast-path"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("globalArgs = %v, want %v", got, want)
	}
	// The fast path when asked for; the flag only ever on systrap.
	for _, tc := range []struct {
		platform string
		fast     bool
		want     bool
	}{{"systrap", true, false}, {"ptrace", false, false}, {"kvm", false, false}} {
		r := &Runsc{Path: "/usr/local/bin/runsc", Root: "/run/x/runsc", Platform: tc.platform, SystrapFastPath: tc.fast}
		if got := slices.Contains(r.globalArgs(), "--systrap-disable-fast-path"); got != tc.want {
			t.Errorf("platform %s, fast path %v: --systrap-disable-fast-path given %v, want %v", tc.platform, tc.fast, got, tc.want)
		}
	}
	for _, a := range got {
		for _, bad := range []string{"--rootless", "--ignore-cgroups", "--TESTONLY", "host"} {
			if strings.Contains(a, bad) {
				t.Errorf("global flag %q contains %q", a, bad)
			}
		}
	}
}

func TestCallArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		got, want []string
	}{
		{CreateOpts{Bundle: "/b"}.args("id1"), []string{"create", "--bundle=/b", "id1"}},
		{CreateOpts{Bundle: "/b", PidFile: "/p"}.args("id1"), []string{"create", "--bundle=/b", "--pid-file=/p", "id1"}},
		{KillOpts{}.args("id1"), []string{"kill", "id1", "9"}},
		{KillOpts{Signal: 15, All: true}.args("id1"), []string{"kill", "--all", "id1", "15"}},
		{DeleteOpts{Force: true}.args("id1"), []string{"delete", "--force", "id1"}},
		{DeleteOpts{}.args("id1"), []string{"delete", "id1"}},
		{CheckpointOpts{ImagePath: "/s/img", ExcludeZeroPages: true}.args("id1"), []string{"checkpoint", "--image-path=/s/img", "--exclude-committed-zero-pages", "id1"}},
		{RestoreOpts{Bundle: "/b", ImagePath: "/s/img"}.args("id2"), []string{"restore", "--detach", "--bundle=/b", "--image-path=/s/img", "id2"}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("args = %v, want %v", tc.got, tc.want)
		}
	}
}

func TestBuildSpecIsHardened(t *testing.T) {
	t.Parallel()
	s, err := BuildSpec(SpecOptions{
		RootfsPath: "/var/lib/renderbox/rootfs/x/rootfs", Args: []string{AgentPath},
		UID: AgentUID, GID: AgentGID, CgroupsPath: "/renderbox/rbx-1",
		Limits: Limits{MemoryBytes: 300 << 20, Pids: 99, TmpBytes: 7 << 20, CPUs: 0.5}.WithDefaults(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Root.Readonly {
		t.Error("root is writable")
	}
	p := s.Process
	if p.User.UID != AgentUID || p.User.GID != AgentGID || len(p.User.AdditionalGids) != 0 {
		t.Errorf("user = %+v, want the agent's %d:%d and no extra groups", p.User, AgentUID, AgentGID)
	}
	// The agent's only capabilities start renderers as another uid (it
	// empties its inheritable and ambient sets before it starts any:
	// TestIsolationFromInside).
	c := p.Capabilities
	want := []string{"CAP_KILL", "CAP_SETGID", "CAP_SETUID"}
	if c == nil || !slices.Equal(c.Bounding, want) || !slices.Equal(c.Effective, want) || !slices.Equal(c.Permitted, want) ||
		!slices.Equal(c.Inheritable, want) || !slices.Equal(c.Ambient, want) {
		t.Errorf("capabilities = %+v, want %v and nothing else", c, want)
	}
	if p.OOMScoreAdj == nil || *p.OOMScoreAdj != 1000 {
		t.Errorf("oomScoreAdj = %v, want 1000: sandboxes die before the worker", p.OOMScoreAdj)
	}
	if _, err := BuildSpec(SpecOptions{RootfsPath: "/r", Args: []string{AgentPath}, UID: wire.RendererUID, GID: AgentGID, CgroupsPath: "/c"}); err == nil {
		t.Error("a spec whose agent runs as the renderer's uid was built")
	}
	if !p.NoNewPrivileges {
		t.Error("noNewPrivileges is off")
	}
	if p.Terminal {
		t.Error("terminal is on")
	}
	rl := map[string]uint64{}
	for _, r := range p.Rlimits {
		rl[r.Type] = r.Hard
	}
	for _, name := range []string{"RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE"} {
		if _, ok := rl[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if rl["RLIMIT_CORE"] != 0 {
		t.Errorf("RLIMIT_CORE = %d, want 0", rl["RLIMIT_CORE"])
	}
	byDest := map[string]specs.Mount{}
	for _, m := range s.Mounts {
		byDest[m.Destination] = m
		// The one bind mount is a file of the read-only rootfs, read-only.
		if m.Type == "bind" || m.Type == "rbind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind") {
			if m.Source != "/var/lib/renderbox/rootfs/x/rootfs"+MaskFile || !slices.Contains(m.Options, "ro") {
				t.Errorf("host bind mount %+v", m)
			}
		}
	}
	tmp := byDest["/tmp"]
	if tmp.Type != "tmpfs" || !slices.Contains(tmp.Options, "size=7340032") ||
		!slices.Contains(tmp.Options, "nosuid") || !slices.Contains(tmp.Options, "nodev") || !slices.Contains(tmp.Options, "noexec") {
		t.Errorf("/tmp mount = %+v, want a nosuid,nodev,noexec tmpfs with size=7340032", tmp)
	}
	if sys := byDest["/sys"]; sys.Type != "tmpfs" || !slices.Contains(sys.Options, "ro") {
		t.Errorf("/sys mount = %+v, want a read-only tmpfs masking gVisor's sysfs", sys)
	}
	if fuse := byDest["/dev/fuse"]; fuse.Type != "bind" || !slices.Contains(fuse.Options, "ro") {
		t.Errorf("/dev/fuse mount = %+v, want the rootfs's empty file, read-only", fuse)
	}
	ns := map[specs.LinuxNamespaceType]bool{}
	for _, n := range s.Linux.Namespaces {
		if n.Path != "" {
			t.Errorf("namespace %s joins %s, want a new one", n.Type, n.Path)
		}
		ns[n.Type] = true
	}
	for _, want := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.NetworkNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace} {
		if !ns[want] {
			t.Errorf("no new %s namespace", want)
		}
	}
	r := s.Linux.Resources
	if *r.Memory.Limit != 300<<20 || *r.Pids.Limit != 99 || *r.CPU.Quota != 50_000 || *r.CPU.Period != 100_000 {
		t.Errorf("resources = mem %d pids %d cpu %d/%d", *r.Memory.Limit, *r.Pids.Limit, *r.CPU.Quota, *r.CPU.Period)
	}
	if len(s.Annotations) != 0 {
		t.Errorf("annotations = %v, want none", s.Annotations)
	}
	if s.Linux.CgroupsPath != "/renderbox/rbx-1" {
		t.Errorf("cgroupsPath = %q", s.Linux.CgroupsPath)
	}
}

// With an image, the only annotations are gVisor's root image ones; the
// root stays read-only.
func TestBuildSpecMountsTheImage(t *testing.T) {
	t.Parallel()
	s, err := BuildSpec(SpecOptions{
		RootfsPath: "/var/lib/renderbox/rootfs/x/rootfs", RootfsImage: "/var/lib/renderbox/rootfs/x/rootfs.erofs",
		Args: []string{AgentPath}, UID: AgentUID, GID: AgentGID, CgroupsPath: "/renderbox/rbx-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"dev.gvisor.spec.rootfs.source": "/var/lib/renderbox/rootfs/x/rootfs.erofs", "dev.gvisor.spec.rootfs.type": "erofs"}
	if !maps.Equal(s.Annotations, want) || !s.Root.Readonly {
		t.Errorf("annotations %v, root read-only %v; want %v and read-only", s.Annotations, s.Root.Readonly, want)
	}
}

// With NoSwap the spec's memory+swap is the memory limit: no swap at all
// (runsc writes it to memory.memsw.limit_in_bytes on v1, and 0 to
// memory.swap.max on v2). Without it (a kernel that does not account swap)
// there is none: runsc would fail to write it.
func TestBuildSpecAllowsNoSwap(t *testing.T) {
	t.Parallel()
	for _, noSwap := range []bool{true, false} {
		s, err := BuildSpec(SpecOptions{
			RootfsPath: "/r", Args: []string{AgentPath}, UID: AgentUID, GID: AgentGID, CgroupsPath: "/c",
			Limits: Limits{MemoryBytes: 300 << 20}.WithDefaults(), NoSwap: noSwap,
		})
		if err != nil {
			t.Fatal(err)
		}
		m := s.Linux.Resources.Memory
		switch {
		case noSwap && (m.Swap == nil || *m.Swap != 300<<20 || *m.Limit != 300<<20):
			t.Errorf("NoSwap: memory %+v, want limit and swap (memory+swap) both %d", m, 300<<20)
		case !noSwap && m.Swap != nil:
			t.Errorf("without NoSwap: swap %d, want none", *m.Swap)
		}
	}
}

// Swap the kernel does not account is refused when the host has any, and
// warned about when it has none.
func TestJudgeSwap(t *testing.T) {
	t.Parallel()
	if limited, detail, err := judgeSwap(true, 4<<20, false); !limited || err != nil || !strings.Contains(detail, "memory.memsw.limit_in_bytes = memory.limit_in_bytes") {
		t.Errorf("accounted v1: %v %q %v, want limited by memsw", limited, detail, err)
	}
	if limited, detail, err := judgeSwap(true, 0, true); !limited || err != nil || !strings.Contains(detail, "memory.swap.max = 0") {
		t.Errorf("accounted v2: %v %q %v, want limited by memory.swap.max", limited, detail, err)
	}
	_, _, err := judgeSwap(false, 4<<20, false)
	if err == nil || !strings.Contains(err.Error(), "4096 MiB of swap") || !strings.Contains(err.Error(), "swapaccount=1") || !strings.Contains(err.Error(), "swapoff") {
		t.Errorf("unaccounted swap on v1: %v, want a refusal naming swapaccount=1 and swapoff", err)
	}
	if _, _, err := judgeSwap(false, 1024, true); err == nil || !strings.Contains(err.Error(), "cgroup.memory=noswap") {
		t.Errorf("unaccounted swap on v2: %v, want a refusal naming cgroup.memory=noswap", err)
	}
	if limited, detail, err := judgeSwap(false, 0, false); limited || err != nil || !strings.Contains(detail, "no swap now") {
		t.Errorf("unaccounted, no swap: %v %q %v, want not limited, a warning", limited, detail, err)
	}
}

func TestBuildSpecRefusesRoot(t *testing.T) {
	t.Parallel()
	_, err := BuildSpec(SpecOptions{RootfsPath: "/r", Args: []string{"/a"}, CgroupsPath: "/c", UID: 0, GID: 0})
	if err == nil {
		t.Error("BuildSpec accepted uid 0")
	}
}

func TestVersionCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := filepath.Join(dir, "runsc")
	exe.Write(t, old, "#!/bin/sh\necho 'runsc version release-20220425.0'\necho 'spec: 1.0.2'\n")
	_, err := CheckVersion(context.Background(), old)
	if !errors.Is(err, ErrRunscTooOld) || !strings.Contains(err.Error(), "go install gvisor.dev/gvisor/runsc@"+PinnedRunsc) {
		t.Errorf("CheckVersion(2022 release) = %v, want ErrRunscTooOld naming the install command", err)
	}
	newer := filepath.Join(dir, "runsc-new")
	exe.Write(t, newer, "#!/bin/sh\necho 'runsc version release-20261101.0'\n")
	if v, err := CheckVersion(context.Background(), newer); err != nil || v.Date != "20261101" {
		t.Errorf("CheckVersion(2026-11 release) = %+v, %v; want accepted", v, err)
	}
	if _, err := Locate(filepath.Join(dir, "nope")); !errors.Is(err, ErrRunscMissing) || !strings.Contains(err.Error(), "go install") {
		t.Errorf("Locate(missing) = %v, want ErrRunscMissing naming the install command", err)
	}
	if !pseudoRe.MatchString(PinnedRunsc) || PinnedRunsc[7:15] != MinRunscDate {
		t.Errorf("pinned %s does not match the minimum date %s", PinnedRunsc, MinRunscDate)
	}
}

func TestStateMachine(t *testing.T) {
	t.Parallel()
	s := &Sandbox{ID: "x"}
	if err := s.transition(StateRunning, StateCreated); err == nil {
		t.Error("new → running allowed")
	}
	if err := s.transition(StateCreated, StateNew); err != nil {
		t.Error(err)
	}
	if err := s.transition(StateCreated, StateNew); err == nil {
		t.Error("created → created allowed")
	}
}

// A job with a lower RLIMIT_NPROC fits a pool sandbox only when its
// renderer starts with the job, under the request's limit.
func TestFitsLowerTasksOnlyWhenNothingIsPrebooted(t *testing.T) {
	pool := Limits{Pids: 512, TmpBytes: 512 << 20}.WithDefaults()
	probe := Limits{Pids: 256, TmpBytes: 512 << 20}.WithDefaults()
	if why := fits(probe, pool, false); why != "" {
		t.Errorf("lower tasks, nothing pre-booted: %s, want a fit", why)
	}
	if why := fits(probe, pool, true); why != "spec_limits" {
		t.Errorf("lower tasks, a pre-booted renderer: %q, want spec_limits", why)
	}
	if why := fits(pool, probe, false); why != "spec_limits" {
		t.Errorf("higher tasks: %q, want spec_limits", why)
	}
}

// The worker warns when runsc would not use huge pages: the host's THP
// files are read as the kernel writes them, and runsc's rule is followed.
func TestHugePagesRule(t *testing.T) {
	for _, c := range []struct {
		shmem, defrag string
		want          bool
	}{
		{"always within_size advise [never] deny force", "always defer defer+madvise [madvise] never", false},
		{"always within_size [advise] never deny force", "always defer defer+madvise [madvise] never", false},
		{"always within_size [advise] never deny force", "always [defer] defer+madvise madvise never", true},
		{"always [within_size] advise never deny force", "always defer defer+madvise [madvise] never", true},
		{"[always] within_size advise never deny force", "[always] defer defer+madvise madvise never", true},
	} {
		shmem, err1 := selectedTHP("shmem_enabled", []byte(c.shmem))
		defrag, err2 := selectedTHP("defrag", []byte(c.defrag))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := runscUsesHugePages(shmem, defrag); got != c.want {
			t.Errorf("shmem_enabled=%s defrag=%s: huge pages %v, want %v", shmem, defrag, got, c.want)
		}
	}
	if _, err := selectedTHP("defrag", []byte("madvise")); err == nil {
		t.Error("a file with no selected value parsed")
	}
}

func TestSandboxWordsAreCapped(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", maxErrorText)
	if h := headOf(long, maxErrorText); len(h) > maxErrorText+len("…") || !strings.HasSuffix(h, "…") || !utf8.ValidString(h) {
		t.Errorf("headOf: %d bytes, valid %v", len(h), utf8.ValidString(h))
	}
	if h := headOf("short", maxErrorText); h != "short" {
		t.Errorf("headOf(short) = %q", h)
	}
	if tl := tailOf(strings.Repeat("x", 1<<20), maxStderrText); len(tl) > maxStderrText+len("…") {
		t.Errorf("tailOf: %d bytes", len(tl))
	}
}
