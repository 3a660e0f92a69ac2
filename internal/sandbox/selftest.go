package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

// Check is one isolation property and whether the sandbox has it.
type Check struct {
	Name   string
	Pass   bool
	Detail string
}

// SelfTest runs the probe in real sandboxes with the manager's production
// spec and checks every isolation property BuildSpec sets up, from inside:
// in a cold sandbox, in one pre-booted by a pool and in one restored from a
// checkpoint image. It also checks that a file or a process one pooled job
// leaves is absent in the next job of the same pool. It opens a TCP
// listener on the host's loopback and asks the probe to connect to it: the
// connection must fail and the listener must see nothing. From the host it
// reads each sandbox's cgroup: no swap past the memory limit. Without
// pooled, only the cold sandbox is checked (a worker whose pool is off).
func (m *Manager) SelfTest(ctx context.Context, pooled bool) ([]Check, error) {
	canary, err := NewCanary("127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("self-test: %w", err)
	}
	defer canary.Close()
	lim := m.cfg.Limits
	sb, err := m.Prepare(ctx, lim)
	if err != nil {
		return nil, fmt.Errorf("self-test: %w", err)
	}
	swap := m.swapCheck(sb)
	cs, err := m.probeIn(ctx, sb, canary, lim)
	if err != nil {
		return nil, err
	}
	cs = append(cs, swap)
	for _, restore := range []bool{false, true} {
		if !pooled {
			break
		}
		more, err := m.selfTestPool(ctx, canary, lim, restore)
		if err != nil {
			return nil, err
		}
		cs = append(cs, more...)
	}
	return cs, nil
}

// probeIn runs the probe in sb (a cold sandbox when nil) and judges it.
func (m *Manager) probeIn(ctx context.Context, sb *Sandbox, canary *Canary, lim Limits) ([]Check, error) {
	req := wire.Request{Mode: wire.ModeProbe, Probe: &wire.ProbeRequest{
		Dial:    []string{canary.Addr()},
		FillTmp: lim.TmpBytes + 16<<20,
	}}
	job := Job{Request: req, Limits: lim}
	var res *Result
	var err error
	if sb == nil {
		res, err = m.Run(ctx, job)
	} else {
		res, err = m.RunIn(ctx, sb, job)
	}
	if err != nil {
		return nil, fmt.Errorf("self-test: running the probe: %w", err)
	}
	p := res.Response.Result.Probe
	if p == nil {
		return nil, fmt.Errorf("self-test: the probe returned no report")
	}
	return CheckProbe(p, lim, canary.Hits()), nil
}

// selfTestPool checks sandboxes from a pool (restored from a checkpoint
// when restore): the probe's properties, and that nothing of one job is
// seen by the next. The pool makes its sandboxes with a higher memory
// limit than lim, as a renderer family's can be above a job's: each job
// runs in one lowered to lim's, and its swap limit must follow.
func (m *Manager) selfTestPool(ctx context.Context, canary *Canary, lim Limits, restore bool) (cs []Check, err error) {
	made := lim
	made.MemoryBytes += 256 << 20
	pool, err := m.NewPool(PoolConfig{Families: []PoolFamily{{Name: "selftest", Limits: made, Size: 1, Restore: restore}}})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	pool.Start(pctx)
	defer func() {
		cancel()
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ccancel()
		err = errors.Join(err, pool.Close(cctx))
	}()
	next := func() (*Sandbox, string, error) {
		deadline := time.Now().Add(time.Minute)
		for {
			if sb, mode := pool.Take(ctx, "selftest", lim); sb != nil {
				return sb, mode, nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, "", fmt.Errorf("self-test: the pool had no sandbox ready within a minute")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	sb, mode, err := next()
	if err != nil {
		return nil, err
	}
	swap := m.swapCheck(sb)
	probed, err := m.probeIn(ctx, sb, canary, lim)
	if err != nil {
		return nil, err
	}
	for _, c := range append(probed, swap) {
		c.Name += " (" + mode + ")"
		cs = append(cs, c)
	}
	// One job leaves a file and a process behind; the next looks for them.
	sh := func(script string) Job {
		return Job{Limits: lim, Request: wire.Request{Mode: wire.ModeRender, InputName: "input",
			Env: []string{"PATH=/usr/bin:/bin"}, Argv: []string{"/bin/sh", "-c", script}}}
	}
	if sb, _, err = next(); err != nil {
		return nil, err
	}
	if _, err := m.RunIn(ctx, sb, sh("echo left > /tmp/selftest-left; setsid sleep 600 </dev/null >/dev/null 2>&1 &")); err != nil {
		return nil, fmt.Errorf("self-test: the job that leaves state: %w", err)
	}
	if sb, _, err = next(); err != nil {
		return nil, err
	}
	res, err := m.RunIn(ctx, sb, sh("ls -A /tmp > /tmp/out/tmp; cat /proc/[0-9]*/cmdline | tr '\\0' ' ' > /tmp/out/procs"))
	if err != nil {
		return nil, fmt.Errorf("self-test: the job that looks for state: %w", err)
	}
	seen := map[string]string{}
	for _, f := range res.Response.Files {
		seen[f.Name] = string(f.Data)
	}
	fileGone := !strings.Contains(seen["tmp"], "selftest-left")
	procGone := !strings.Contains(seen["procs"], "sleep 600")
	cs = append(cs, Check{Name: "nothing left between jobs (" + mode + ")", Pass: fileGone && procGone && seen["tmp"] != "",
		Detail: fmt.Sprintf("the next job's /tmp: %q; its processes: %q", strings.TrimSpace(seen["tmp"]), strings.TrimSpace(seen["procs"]))})
	return cs, nil
}

// swapCheck reads sb's cgroup on the host: its memory limit is the
// sandbox's and it may not swap past it. Where the kernel does not account
// swap there is no limit to read, and it passes only while the host has no
// swap (CheckSwap).
func (m *Manager) swapCheck(sb *Sandbox) Check {
	c := Check{Name: "no swap"}
	if m.noSwap {
		c.Pass, c.Detail = swapLimit(sb.cgroup, sb.Limits.MemoryBytes)
		return c
	}
	_, detail, err := CheckSwap()
	c.Pass, c.Detail = err == nil, detail
	if err != nil {
		c.Detail = err.Error()
	}
	return c
}

// Canary is a TCP listener on the host that counts the connections it
// gets. Nothing in a sandbox may ever reach it.
type Canary struct {
	ln   net.Listener
	hits atomic.Int64
}

// NewCanary listens on addr (e.g. "127.0.0.1:0") and counts connections.
func NewCanary(addr string) (*Canary, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("opening the canary listener: %w", err)
	}
	c := &Canary{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.hits.Add(1)
			conn.Close()
		}
	}()
	return c, nil
}

// Addr is the listener's address.
func (c *Canary) Addr() string { return c.ln.Addr().String() }

// Hits is how many connections it accepted.
func (c *Canary) Hits() int64 { return c.hits.Load() }

// Close stops listening.
func (c *Canary) Close() error { return c.ln.Close() }

// CheckProbe judges a probe report against the limits the sandbox ran with
// (resolved, as Sandbox.Limits).
// canaryHits is how many connections the host-side listener accepted.
func CheckProbe(p *wire.ProbeReport, lim Limits, canaryHits int64) []Check {
	var cs []Check
	add := func(name string, pass bool, format string, args ...any) {
		cs = append(cs, Check{Name: name, Pass: pass, Detail: fmt.Sprintf(format, args...)})
	}
	add("non-root user", p.UID == wire.RendererUID && p.EUID == p.UID && p.GID == wire.RendererGID && p.EGID == p.GID,
		"uid=%d euid=%d gid=%d egid=%d", p.UID, p.EUID, p.GID, p.EGID)
	zero := func(s string) bool { return strings.Trim(s, "0") == "" && s != "" }
	// The bounding set is inherited from the agent and cannot be emptied
	// without a third capability; with nothing else it grants nothing
	// (noNewPrivileges, no file capabilities in the rootfs).
	bnd, _ := strconv.ParseUint(p.CapBnd, 16, 64)
	add("no capabilities", zero(p.CapInh) && zero(p.CapPrm) && zero(p.CapEff) && zero(p.CapAmb) && p.CapBnd != "" && bnd&^agentCapBits == 0,
		"CapInh=%s CapPrm=%s CapEff=%s CapBnd=%s CapAmb=%s", p.CapInh, p.CapPrm, p.CapEff, p.CapBnd, p.CapAmb)
	if a := p.Agent; a == nil {
		add("agent above the renderer", false, "the report has no view of the agent")
	} else {
		eff, _ := strconv.ParseUint(a.CapEff, 16, 64)
		prm, _ := strconv.ParseUint(a.CapPrm, 16, 64)
		add("agent above the renderer", a.UID != 0 && a.UID != p.UID && a.GID != p.GID && eff == agentCapBits && prm == agentCapBits && zero(a.CapInh) && zero(a.CapAmb),
			"agent uid=%d gid=%d CapEff=%s CapPrm=%s CapInh=%s CapAmb=%s; renderer uid=%d", a.UID, a.GID, a.CapEff, a.CapPrm, a.CapInh, a.CapAmb, p.UID)
	}
	add("no new privileges", p.NoNewPrivs == "1", "NoNewPrivs=%s", p.NoNewPrivs)
	add("loopback only", len(p.Interfaces) == 1 && p.Interfaces[0] == "lo", "interfaces=%v", p.Interfaces)
	dialsFailed := len(p.Dials) > 0
	var dialDetail []string
	for _, d := range p.Dials {
		dialsFailed = dialsFailed && d.Error != ""
		dialDetail = append(dialDetail, fmt.Sprintf("%s: %s", d.Addr, orConnected(d.Error)))
	}
	add("no route to the host", dialsFailed && canaryHits == 0,
		"%s; host listener accepted %d", strings.Join(dialDetail, "; "), canaryHits)
	add("read-only root", strings.Contains(p.RootWriteError, "read-only file system"),
		"writing the world-writable /var/tmp of the rootfs: %s", orSucceeded(p.RootWriteError))
	add("writable /tmp", p.TmpWriteError == "", "writing /tmp: %s", orSucceeded(p.TmpWriteError))
	add("/tmp does not execute", p.TmpExecError != "", "running a binary copied to /tmp: %s", orSucceeded(p.TmpExecError))
	sysMount := "none"
	for _, mnt := range p.Mounts {
		if f := strings.Fields(mnt); len(f) >= 4 && f[1] == "/sys" {
			sysMount = f[2] + " " + f[3]
		}
	}
	add("read-only /sys", p.SysWriteError != "" && strings.HasPrefix(sysMount, "tmpfs ") && strings.Contains(","+strings.Fields(sysMount)[1]+",", ",ro,"),
		"writing /sys: %s; mounted: %s", orSucceeded(p.SysWriteError), sysMount)
	add("no /dev/fuse", p.FuseError != "", "opening /dev/fuse: %s %s", orSucceeded(p.FuseError), p.FuseDetail)
	capped := p.TmpSizeBytes > 0 && p.TmpSizeBytes <= uint64(lim.TmpBytes) && p.TmpFilled <= lim.TmpBytes && p.TmpFillError == "ENOSPC"
	add("capped /tmp", capped, "tmpfs size %d MiB (limit %d MiB); filling stopped at %d MiB: %s",
		p.TmpSizeBytes>>20, lim.TmpBytes>>20, p.TmpFilled>>20, orSucceeded(p.TmpFillError))
	gvisor := strings.Contains(p.KernelLog, "gVisor")
	add("gVisor kernel", gvisor, "%s %s; syslog: %q", p.Sysname, p.Release, firstLine(p.KernelLog))
	var rw []string
	rootRO := false
	for _, mnt := range p.Mounts {
		f := strings.Fields(mnt)
		if len(f) < 4 {
			continue
		}
		ro := strings.Contains(","+f[3]+",", ",ro,")
		if f[1] == "/" {
			rootRO = ro
		}
		// Writable is fine only for file systems that live inside the
		// sandbox's own kernel; anything else would be host storage.
		if !ro && !sandboxLocalFS[f[2]] {
			rw = append(rw, f[1]+" ("+f[2]+")")
		}
	}
	add("no writable host mount", rootRO && len(rw) == 0, "root read-only: %v; writable host-backed mounts: %v", rootRO, rw)
	return cs
}

// sandboxLocalFS are file systems gVisor implements in its own kernel: a
// writable one holds nothing of the host's.
var sandboxLocalFS = map[string]bool{
	"tmpfs": true, "dev": true, "proc": true, "sysfs": true, "devpts": true, "mqueue": true, "devtmpfs": true, "cgroup": true,
}

// agentCapBits are agentCaps as /proc/self/status prints them: bits 5
// (CAP_KILL), 6 (CAP_SETGID) and 7 (CAP_SETUID).
const agentCapBits = 1<<5 | 1<<6 | 1<<7

// Failed returns the checks that did not pass.
func Failed(cs []Check) []Check {
	var f []Check
	for _, c := range cs {
		if !c.Pass {
			f = append(f, c)
		}
	}
	return f
}

func orConnected(s string) string {
	if s == "" {
		return "CONNECTED"
	}
	return s
}

func orSucceeded(s string) string {
	if s == "" {
		return "succeeded"
	}
	return s
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
