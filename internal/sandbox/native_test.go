package sandbox

import (
	"slices"
	"strings"
	"testing"
)

// The native floor runs what the bundle says, as the bundle says it: the
// agent's argv and environment, its uid and gid, only its capabilities,
// no new privileges, the spec's /tmp size and rlimits — but RLIMIT_NPROC,
// which the host kernel counts per uid across every native sandbox — and
// joins the sandbox's cgroup before anything runs.
func TestNativeCommandFollowsTheSpec(t *testing.T) {
	lim := Limits{TmpBytes: 64 << 20, NoFile: 256, NProc: 100}.WithDefaults()
	spec, err := BuildSpec(SpecOptions{RootfsPath: "/tree", Args: []string{AgentPath, "--warm", "{}"},
		UID: AgentUID, GID: AgentGID, CgroupsPath: "/p/rbx-1", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	argv, err := nativeCommand(spec, "/tree", []string{"/sys/fs/cgroup/memory/p/rbx-1"})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(argv, " ")
	for _, want := range []string{
		"--mount --propagation private --pid --fork --kill-child --net --ipc --uts --",
		"sh /tree 67108864 /sys/fs/cgroup/memory/p/rbx-1/cgroup.procs -- prlimit",
		"--nofile=256:256", "--fsize=67108864:67108864", "--core=0:0",
		"-- chroot /tree /usr/bin/setpriv --reuid=65533 --regid=65533 --clear-groups",
		"--inh-caps=-all,+kill,+setgid,+setuid --ambient-caps=+kill,+setgid,+setuid --bounding-set=-all,+kill,+setgid,+setuid --no-new-privs",
		"/usr/bin/env -i PATH=", "HOME=/tmp",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("the native command lacks %q:\n%s", want, line)
		}
	}
	if !slices.Equal(argv[len(argv)-3:], []string{AgentPath, "--warm", "{}"}) {
		t.Errorf("the command ends with %q, want the agent's argv", argv[len(argv)-3:])
	}
	if strings.Contains(line, "--nproc") {
		t.Errorf("RLIMIT_NPROC is the spec's: %s", line)
	}
	spec.Process.User.UID = 0
	if _, err := nativeCommand(spec, "/tree", nil); err == nil {
		t.Errorf("a spec whose process is root was run natively")
	}
}
