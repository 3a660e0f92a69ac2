package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/renderbox/renderbox/internal/wire"
)

// The agent and the renderer are two uids. In a sandbox the agent runs as
// its own uid with CAP_SETUID and CAP_SETGID, for one use: every process it
// starts for a job (renderer, browser, office, probe) runs as
// wire.RendererUID, whose execve leaves it no capability. The renderer then
// cannot signal, ptrace or read the agent, nor reach its stdio. Outside a
// sandbox (the bench's native run) both are one uid and nothing changes.

// KeepCapsToSelf empties the agent's inheritable and ambient sets. The spec
// must fill them: without them a non-root process holds no capability after
// the execve that starts it. Its own effective and permitted sets stay; no
// process it starts keeps any across its execve. Capabilities belong to a
// thread, and any of ours may fork the next renderer: every thread is
// changed (the Go runtime starts some before main).
func KeepCapsToSelf() error {
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 {
		return fmt.Errorf("clearing the ambient capabilities: %w", e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	_, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	if e != 0 {
		return fmt.Errorf("clearing the inheritable capabilities: %w", e)
	}
	return nil
}

// nprocReserve is how many tasks of our uid the renderer cannot take: the
// agent shares its uid, and a Go program that cannot create a thread dies.
const nprocReserve = 64

// spawnPlan is how the agent starts a process for the job, computed by
// planSpawn without doing anything so that it can be checked anywhere.
type spawnPlan struct {
	// Credential is the renderer's uid and gid with no supplementary
	// groups, or nil when the agent runs as the renderer's uid already.
	Credential *syscall.Credential
	// NProc is the soft RLIMIT_NPROC the process starts under.
	NProc uint64
}

// planSpawn plans a process started by an agent of uid agentUID whose soft
// RLIMIT_NPROC is cur, for a job limited to jobTasks (0: no limit of its
// own): it runs as the renderer's uid, under the job's limit if lower than
// the sandbox's, less a reserve for the agent's own threads (nprocReserve,
// at most half).
func planSpawn(agentUID int, cur, jobTasks uint64) spawnPlan {
	var p spawnPlan
	if agentUID != wire.RendererUID {
		p.Credential = &syscall.Credential{Uid: wire.RendererUID, Gid: wire.RendererGID, Groups: []uint32{}}
	}
	if jobTasks > 0 && jobTasks < cur {
		cur = jobTasks
	}
	p.NProc = cur - min(nprocReserve, cur/2)
	return p
}

// apply sets cmd's credential as planned; the RLIMIT_NPROC is the
// caller's to set around the start.
func (p spawnPlan) apply(cmd *exec.Cmd) {
	if p.Credential == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = p.Credential
}

// makeDirs creates the job's directories, owned by the agent: the outputs
// and the scratch space writable by the renderer, and the input's
// directory too, sticky (LibreOffice writes its lock file beside the
// document, and waits forever where it cannot), so that the input itself,
// the agent's, stays as it was written. The agent reads the outputs back
// without following links and only if they are regular files (sendFile).
func makeDirs() error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{wire.InputDir, 0o777 | os.ModeSticky}, {wire.OutputDir, 0o777}, {wire.WorkDir, 0o777}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		// MkdirAll's mode passes through the umask.
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// ProbeArg runs the agent as the probe's child: it reports the sandbox as a
// renderer sees it, the request as JSON in the next argument.
const ProbeArg = "--probe"

// probeAsRenderer runs the probe in a child as the renderer's uid and adds
// the agent's own view.
func (a *Agent) probeAsRenderer(req *wire.ProbeRequest) (*wire.ProbeReport, error) {
	arg, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe", ProbeArg, string(arg))
	cmd.Env = []string{}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := a.start(cmd); err != nil {
		return nil, fmt.Errorf("starting the probe: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("the probe: %v: %s", err, strings.TrimSpace(errOut.String()))
	}
	var r wire.ProbeReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("decoding the probe's report: %w", err)
	}
	v := &wire.AgentView{UID: os.Getuid(), GID: os.Getgid()}
	st := readStatus()
	v.CapInh, v.CapPrm, v.CapEff, v.CapBnd, v.CapAmb = st["CapInh"], st["CapPrm"], st["CapEff"], st["CapBnd"], st["CapAmb"]
	r.Agent = v
	return &r, nil
}

// Probe is the probe's side, arg its wire.ProbeRequest as JSON: the
// report goes to out.
func Probe(arg string, out io.Writer) error {
	var req wire.ProbeRequest
	if err := json.Unmarshal([]byte(arg), &req); err != nil {
		return fmt.Errorf("probe request: %w", err)
	}
	if err := json.NewEncoder(out).Encode((&Agent{}).probe(&req)); err != nil {
		return fmt.Errorf("writing the probe's report: %w", err)
	}
	return nil
}

// readStatus returns the fields of /proc/self/status.
func readStatus() map[string]string {
	m := map[string]string{}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}
