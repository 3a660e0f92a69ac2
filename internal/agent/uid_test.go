package agent

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/renderbox/renderbox/internal/wire"
)

// What the agent would do starting a renderer process: switch to the
// renderer's uid unless it is that uid already, and leave the process an
// RLIMIT_NPROC under the job's and the sandbox's, less the agent's reserve.
func TestPlanSpawn(t *testing.T) {
	t.Parallel()
	const agentUID = 65533
	for _, tc := range []struct {
		name          string
		uid           int
		cur, jobTasks uint64
		switchUID     bool
		nproc         uint64
	}{
		{"agent uid, the sandbox's limit", agentUID, 512, 0, true, 512 - nprocReserve},
		{"agent uid, a lower job limit", agentUID, 512, 200, true, 200 - nprocReserve},
		{"a job limit above the sandbox's", agentUID, 512, 4096, true, 512 - nprocReserve},
		{"a small limit keeps half", agentUID, 100, 0, true, 50},
		{"a tiny job limit", agentUID, 512, 3, true, 2},
		{"root", 0, 512, 0, true, 512 - nprocReserve},
		{"no limit", agentUID, ^uint64(0), 0, true, ^uint64(0) - nprocReserve},
		{"the bench's native run: one uid", wire.RendererUID, 512, 0, false, 512 - nprocReserve},
	} {
		p := planSpawn(tc.uid, tc.cur, tc.jobTasks)
		if p.NProc != tc.nproc {
			t.Errorf("%s: RLIMIT_NPROC %d, want %d", tc.name, p.NProc, tc.nproc)
		}
		if !tc.switchUID {
			if p.Credential != nil {
				t.Errorf("%s: switches to %+v, want no switch", tc.name, *p.Credential)
			}
			continue
		}
		c := p.Credential
		if c == nil || c.Uid != wire.RendererUID || c.Gid != wire.RendererGID || c.Groups == nil || len(c.Groups) != 0 || c.NoSetGroups {
			t.Errorf("%s: credential %+v, want uid %d gid %d and no supplementary groups", tc.name, c, wire.RendererUID, wire.RendererGID)
		}
	}
}

// apply keeps what the command already asks of the kernel.
func TestSpawnPlanApplyKeepsTheProcessAttributes(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	planSpawn(0, 512, 0).apply(cmd)
	a := cmd.SysProcAttr
	if !a.Setpgid || a.Pdeathsig != syscall.SIGKILL || a.Credential == nil || a.Credential.Uid != wire.RendererUID {
		t.Fatalf("got %+v", a)
	}
	cmd = exec.Command("/bin/true")
	planSpawn(wire.RendererUID, 512, 0).apply(cmd)
	if cmd.SysProcAttr != nil {
		t.Fatalf("no switch planned, but SysProcAttr is %+v", cmd.SysProcAttr)
	}
}
