package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where cgroup hierarchies are mounted; a variable so tests
// can point it elsewhere.
var cgroupRoot = "/sys/fs/cgroup"

// cgroupV2 reports whether the unified hierarchy is mounted at cgroupRoot.
// A hybrid host (v1 controllers plus an empty unified mount below) is v1,
// which is how runsc sees it too.
func cgroupV2() bool {
	var st unix.Statfs_t
	return unix.Statfs(cgroupRoot, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// CheckCgroups fails unless the memory, cpu and pids controllers are
// available; without them the limits in the spec would be silently absent.
func CheckCgroups() error {
	if cgroupV2() {
		b, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"))
		if err != nil {
			return fmt.Errorf("cgroups: reading cgroup v2 controllers: %w", err)
		}
		ctrl, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
		if err != nil {
			return fmt.Errorf("cgroups: reading cgroup v2 controllers: %w", err)
		}
		have := strings.Fields(string(ctrl) + " " + string(b))
		for _, want := range []string{"memory", "cpu", "pids"} {
			if !contains(have, want) {
				return fmt.Errorf("cgroups: the v2 %s controller is not available at %s; enable it (cgroup_enable=%s) — renderbox will not run without limits", want, cgroupRoot, want)
			}
		}
		return nil
	}
	for _, want := range []string{"memory", "cpu", "pids"} {
		if _, err := os.Stat(filepath.Join(cgroupRoot, want, "cgroup.procs")); err != nil {
			return fmt.Errorf("cgroups: the v1 %s controller is not mounted at %s/%s; mount it — renderbox will not run without limits", want, cgroupRoot, want)
		}
	}
	return nil
}

// SwapAccounting reports whether the kernel charges swap to cgroups, which
// a sandbox's swap limit needs: on v1 the memory hierarchy then has
// memory.memsw.* files (none when the kernel lacks CONFIG_MEMCG_SWAP or
// was booted with swapaccount=0); on v2 every cgroup with the memory
// controller has memory.swap.max (none after cgroup.memory=noswap). The
// v2 root has no memory files: its children are looked at.
func SwapAccounting() bool {
	if !cgroupV2() {
		return exists(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes"))
	}
	withMemory, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", "memory.current"))
	return len(withMemory) > 0 && exists(filepath.Join(filepath.Dir(withMemory[0]), "memory.swap.max"))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// hostSwapKiB is the host's swap space (SwapTotal of /proc/meminfo).
func hostSwapKiB() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("swap: reading the host's swap space: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SwapTotal:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("swap: reading the host's swap space: /proc/meminfo has no SwapTotal")
}

// CheckSwap tells whether sandboxes can swap past their memory limits.
// Where the kernel accounts swap, every sandbox's memory+swap is capped at
// its memory limit (limited). Where it does not, nothing caps a sandbox's
// swap: an error if the host has swap, and not limited (a warning) if it
// has none now, as a later swapon would add some.
func CheckSwap() (limited bool, detail string, err error) {
	accounted := SwapAccounting()
	var swapKiB int64
	if !accounted {
		if swapKiB, err = hostSwapKiB(); err != nil {
			return false, "", err
		}
	}
	return judgeSwap(accounted, swapKiB, cgroupV2())
}

// judgeSwap is CheckSwap's verdict on what it read.
func judgeSwap(accounted bool, swapKiB int64, v2 bool) (limited bool, detail string, err error) {
	if accounted {
		f := "memory.memsw.limit_in_bytes = memory.limit_in_bytes"
		if v2 {
			f = "memory.swap.max = 0"
		}
		return true, "the kernel accounts swap to cgroups: every sandbox gets " + f, nil
	}
	how := "boot the kernel with swapaccount=1"
	if v2 {
		how = "boot the kernel without cgroup.memory=noswap"
	}
	if swapKiB > 0 {
		return false, "", fmt.Errorf("swap: the host has %d MiB of swap and the kernel does not account swap to cgroups: a sandbox at its memory limit would swap out into all of it; %s, or turn swap off (swapoff -a) — renderbox will not run without limits", swapKiB>>10, how)
	}
	return false, "the kernel does not account swap to cgroups, and the host has no swap now; a swapon would let sandboxes swap past their memory limits (" + how + ")", nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cgroupDirs returns every directory that holds cgroup path rel (as given in
// the spec's cgroupsPath): one per v1 hierarchy, or the one v2 directory.
func cgroupDirs(rel string) []string {
	if cgroupV2() {
		return []string{filepath.Join(cgroupRoot, rel)}
	}
	ents, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil
	}
	var dirs []string
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "unified" {
			continue
		}
		dirs = append(dirs, filepath.Join(cgroupRoot, e.Name(), rel))
	}
	return dirs
}

// LeftoverCgroups lists the cgroup directories that still exist under rel.
func LeftoverCgroups(rel string) []string {
	var left []string
	for _, d := range cgroupDirs(rel) {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				left = append(left, filepath.Join(d, e.Name()))
			}
		}
	}
	return left
}

// counters are what the cgroup saw of a sandbox's limits.
type counters struct {
	OOMKills int64 // the memory controller killed something
	PidsMax  int64 // a fork/clone failed at the pids limit
}

// readCounters reads the OOM and pids counters of cgroup rel. It must run
// before Destroy, which removes the cgroup.
func readCounters(rel string) counters {
	var c counters
	if cgroupV2() {
		d := filepath.Join(cgroupRoot, rel)
		c.OOMKills = keyed(filepath.Join(d, "memory.events"), "oom_kill")
		c.PidsMax = keyed(filepath.Join(d, "pids.events"), "max")
		return c
	}
	c.OOMKills = keyed(filepath.Join(cgroupRoot, "memory", rel, "memory.oom_control"), "oom_kill")
	c.PidsMax = keyed(filepath.Join(cgroupRoot, "pids", rel, "pids.events"), "max")
	return c
}

// keyed reads "key value" lines and returns the value of key, 0 if absent.
func keyed(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// removeCgroup removes cgroup rel from every hierarchy, killing whatever is
// still in it first. Missing directories are fine.
func removeCgroup(rel string) error {
	var errs []error
	for _, d := range cgroupDirs(rel) {
		if err := removeCgroupDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeCgroupDir(d string) error {
	if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// Children first (runsc does not nest, but a predecessor might have).
	if ents, err := os.ReadDir(d); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				if err := removeCgroupDir(filepath.Join(d, e.Name())); err != nil {
					return err
				}
			}
		}
	}
	// A sandbox's gofer leaves its cgroup a few milliseconds after the
	// sandbox process ends: asked again every 2 ms, up to a second.
	var err error
	for i := 0; i < 500; i++ {
		killProcs(d)
		if err = syscall.Rmdir(d); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", d, err)
}

func killProcs(d string) {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// ParentCgroupDirs lists the directories of cgroup parent in every
// hierarchy (for removing an emptied parent).
func ParentCgroupDirs(parent string) []string { return cgroupDirs("/" + parent) }

// Pids returns how many host tasks (the Sentry's threads and the gofer
// included) the sandbox's pids cgroup holds now.
func (s *Sandbox) Pids() (int64, error) {
	p := filepath.Join(cgroupRoot, "pids", s.cgroup, "pids.current")
	if cgroupV2() {
		p = filepath.Join(cgroupRoot, s.cgroup, "pids.current")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// cgroupFile returns the path of a controller's file of cgroup rel (v1
// controller name; v2 has one directory).
func cgroupFile(controller, rel, file string) string {
	if cgroupV2() {
		return filepath.Join(cgroupRoot, rel, file)
	}
	return filepath.Join(cgroupRoot, controller, rel, file)
}

// memoryUsage returns the bytes the cgroup's memory controller charges now.
func memoryUsage(rel string) int64 {
	f := cgroupFile("memory", rel, "memory.usage_in_bytes")
	if cgroupV2() {
		f = cgroupFile("memory", rel, "memory.current")
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// lowerCgroup writes the memory, CPU and pids limits of lim into cgroup
// rel, for a sandbox created with higher ones, and with noSwap its swap
// limit with them: memory+swap is the memory limit again (v1; written
// after the memory limit, which it may never be below), no swap (v2). It
// only ever lowers: the caller checks that lim fits under what the sandbox
// was created with.
func lowerCgroup(rel string, lim Limits, noSwap bool) error {
	mem := strconv.FormatInt(lim.MemoryBytes, 10)
	type write struct{ controller, file, value string }
	var ws []write
	if cgroupV2() {
		ws = []write{{"memory", "memory.max", mem}}
		if noSwap {
			ws = append(ws, write{"memory", "memory.swap.max", "0"})
		}
	} else {
		ws = []write{{"memory", "memory.limit_in_bytes", mem}}
		if noSwap {
			ws = append(ws, write{"memory", "memory.memsw.limit_in_bytes", mem})
		}
	}
	ws = append(ws, write{"pids", "pids.max", strconv.FormatInt(lim.Pids, 10)})
	for _, w := range ws {
		f := cgroupFile(w.controller, rel, w.file)
		if err := os.WriteFile(f, []byte(w.value), 0); err != nil {
			return fmt.Errorf("lowering %s to %s: %w", f, w.value, err)
		}
	}
	return lowerCPU(rel, lim.CPUs)
}

// lowerCPU writes a quota of cpus CPUs into cgroup rel (period 100 ms, as
// the spec's).
func lowerCPU(rel string, cpus float64) error {
	period := int64(100_000)
	quota := int64(cpus * float64(period))
	f, v := cgroupFile("cpu", rel, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)
	if cgroupV2() {
		f, v = cgroupFile("cpu", rel, "cpu.max"), fmt.Sprintf("%d %d", quota, period)
	}
	if err := os.WriteFile(f, []byte(v), 0); err != nil {
		return fmt.Errorf("lowering %s to %s: %w", f, v, err)
	}
	return nil
}

// swapLimit reads the memory and swap limits of cgroup rel, which must
// allow memory bytes and no swap: on v1 memory+swap equal to the memory
// limit, on v2 memory.swap.max 0.
func swapLimit(rel string, memory int64) (pass bool, detail string) {
	read := func(file string) string {
		b, err := os.ReadFile(cgroupFile("memory", rel, file))
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(string(b))
	}
	want := strconv.FormatInt(memory, 10)
	if cgroupV2() {
		mem, swap := read("memory.max"), read("memory.swap.max")
		return mem == want && swap == "0", fmt.Sprintf("memory.max %s (the sandbox's limit: %s), memory.swap.max %s", mem, want, swap)
	}
	mem, memsw := read("memory.limit_in_bytes"), read("memory.memsw.limit_in_bytes")
	return mem == want && memsw == want, fmt.Sprintf("memory.limit_in_bytes %s (the sandbox's limit: %s), memory.memsw.limit_in_bytes %s", mem, want, memsw)
}
