package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// DelegatedParent is the CgroupParent a worker passes to say: the service
// manager delegated a cgroup to me (systemd's Delegate=yes); keep my
// sandboxes inside it. Delegate resolves it to a real path.
const DelegatedParent = "delegated"

// Delegate prepares the cgroup that was delegated to this process and
// returns the CgroupParent for its sandboxes: <own cgroup>/sandboxes. The
// sandboxes then count against the unit's own limits and accounting, and
// stopping the unit stops them with it.
//
// On cgroup v1 the process's cgroup must be the same in the memory, cpu
// and pids hierarchies (what Delegate=yes gives a unit) and not the root.
// On v2 a cgroup that holds processes cannot give its children
// controllers, so the process first moves itself into a leaf
// (<own>/supervisor), then turns the controllers on for the children;
// called again, it finds itself in that leaf and returns the same parent.
func Delegate() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroups: %w", err)
	}
	v2 := cgroupV2()
	own, err := ownCgroup(string(b), v2)
	if err != nil {
		return "", err
	}
	if v2 {
		own = strings.TrimSuffix(own, "/"+supervisorLeaf)
		if err := prepareV2(cgroupRoot, own, os.Getpid()); err != nil {
			return "", err
		}
	}
	return strings.TrimPrefix(path.Join(own, "sandboxes"), "/"), nil
}

// supervisorLeaf is where a worker moves itself in a delegated v2 cgroup.
const supervisorLeaf = "supervisor"

// ownCgroup reads /proc/self/cgroup (its text in procSelf) and returns the
// process's delegated cgroup.
func ownCgroup(procSelf string, v2 bool) (string, error) {
	paths := map[string]string{} // controller -> path
	for _, line := range strings.Split(strings.TrimSpace(procSelf), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			paths[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	const how = "run the worker from its systemd unit with Delegate=yes (deploy/systemd/renderbox-worker.service), or give -cgroup-parent a name"
	if v2 {
		own, ok := paths[""]
		if !ok {
			return "", errors.New("cgroups: /proc/self/cgroup has no cgroup v2 line")
		}
		if own == "/" {
			return "", fmt.Errorf("cgroups: -cgroup-parent %s, but this process is in the root cgroup: nothing was delegated; %s", DelegatedParent, how)
		}
		return own, nil
	}
	own := paths["memory"]
	for _, c := range []string{"memory", "cpu", "pids"} {
		p, ok := paths[c]
		if !ok {
			return "", fmt.Errorf("cgroups: /proc/self/cgroup names no v1 %s hierarchy", c)
		}
		if p != own {
			return "", fmt.Errorf("cgroups: -cgroup-parent %s, but this process's cgroups differ (memory %s, cpu %s, pids %s): nothing was delegated; %s", DelegatedParent, paths["memory"], paths["cpu"], paths["pids"], how)
		}
	}
	if own == "/" {
		return "", fmt.Errorf("cgroups: -cgroup-parent %s, but this process is in the root cgroups: nothing was delegated; %s", DelegatedParent, how)
	}
	return own, nil
}

// prepareV2 moves pid into own's supervisor leaf and gives the children of
// own, and of own/sandboxes, the memory, cpu and pids controllers.
func prepareV2(root, own string, pid int) error {
	dir := filepath.Join(root, own)
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroups: the delegated cgroup %s: %w", own, err)
	}
	for _, c := range []string{"memory", "cpu", "pids"} {
		if !contains(strings.Fields(string(ctrl)), c) {
			return fmt.Errorf("cgroups: the delegated cgroup %s lacks the %s controller (Delegate=yes gives it every one)", own, c)
		}
	}
	leaf := filepath.Join(dir, supervisorLeaf)
	sandboxes := filepath.Join(dir, "sandboxes")
	for _, d := range []string{leaf, sandboxes} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroups: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("cgroups: moving the worker into %s: %w", leaf, err)
	}
	for _, d := range []string{dir, sandboxes} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory +cpu +pids"), 0); err != nil {
			return fmt.Errorf("cgroups: turning on memory, cpu and pids below %s: %w", d, err)
		}
	}
	return nil
}
