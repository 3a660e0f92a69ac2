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
// before `runsc delete`, which removes the cgroup.
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
	var err error
	for i := 0; i < 50; i++ {
		killProcs(d)
		if err = syscall.Rmdir(d); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
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
// rel, for a sandbox created with higher ones. It only ever lowers: the
// caller checks that lim fits under what the sandbox was created with.
func lowerCgroup(rel string, lim Limits) error {
	period := int64(100_000)
	quota := int64(lim.CPUs * float64(period))
	type write struct{ controller, file, value string }
	var ws []write
	if cgroupV2() {
		ws = []write{
			{"memory", "memory.max", strconv.FormatInt(lim.MemoryBytes, 10)},
			{"cpu", "cpu.max", fmt.Sprintf("%d %d", quota, period)},
			{"pids", "pids.max", strconv.FormatInt(lim.Pids, 10)},
		}
	} else {
		ws = []write{
			{"memory", "memory.limit_in_bytes", strconv.FormatInt(lim.MemoryBytes, 10)},
			{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)},
			{"pids", "pids.max", strconv.FormatInt(lim.Pids, 10)},
		}
	}
	for _, w := range ws {
		f := cgroupFile(w.controller, rel, w.file)
		if err := os.WriteFile(f, []byte(w.value), 0); err != nil {
			return fmt.Errorf("lowering %s to %s: %w", f, w.value, err)
		}
	}
	return nil
}
