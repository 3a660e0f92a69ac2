package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/renderbox/renderbox/internal/wire"
)

// probe reports what a renderer in this sandbox could see and do. It asserts
// nothing itself: the host decides what passes (sandbox.CheckProbe).
func (a *Agent) probe(req *wire.ProbeRequest) *wire.ProbeReport {
	if req == nil {
		req = &wire.ProbeRequest{}
	}
	r := &wire.ProbeReport{
		UID: os.Getuid(), GID: os.Getgid(), EUID: os.Geteuid(), EGID: os.Getegid(),
	}
	r.Groups, _ = os.Getgroups()
	ps := readStatus()
	r.CapInh, r.CapPrm, r.CapEff, r.CapBnd, r.CapAmb = ps["CapInh"], ps["CapPrm"], ps["CapEff"], ps["CapBnd"], ps["CapAmb"]
	r.NoNewPrivs, r.Seccomp = ps["NoNewPrivs"], ps["Seccomp"]
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			r.Interfaces = append(r.Interfaces, i.Name)
		}
	}
	// /var/tmp is world-writable in the rootfs, so only a read-only mount
	// stops the write there; / alone would fail on permissions anyway.
	r.RootWriteError = errString(tryWrite("/var/tmp/.renderbox-probe"))
	r.TmpWriteError = errString(tryWrite("/tmp/.renderbox-probe"))
	_, err := writeSys()
	r.SysWriteError = errString(err)
	_, err = execFromTmp()
	r.TmpExecError = errString(err)
	r.FuseDetail, err = openFuse()
	r.FuseError = errString(err)
	var st unix.Statfs_t
	if unix.Statfs("/tmp", &st) == nil {
		r.TmpSizeBytes = st.Blocks * uint64(st.Bsize)
	}
	if req.FillTmp > 0 {
		r.TmpFilled, r.TmpFillError = fillTmp(req.FillTmp)
	}
	if m, err := os.ReadFile("/proc/self/mounts"); err == nil {
		r.Mounts = strings.Split(strings.TrimSpace(string(m)), "\n")
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Sysname = unix.ByteSliceToString(u.Sysname[:])
		r.Release = unix.ByteSliceToString(u.Release[:])
		r.Version = unix.ByteSliceToString(u.Version[:])
	}
	r.Hostname, _ = os.Hostname()
	buf := make([]byte, 8192)
	if n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf); err == nil && n > 0 {
		r.KernelLog = firstLines(string(buf[:n]), 5)
	}
	for _, addr := range req.Dial {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
		}
		r.Dials = append(r.Dials, wire.DialResult{Addr: addr, Error: errString(err)})
	}
	if req.Escape {
		r.Escapes = a.runEscapes()
	}
	return r
}

func tryWrite(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("probe"))
	f.Close()
	os.Remove(path)
	return err
}

// fillTmp writes up to limit bytes to /tmp, in files of 32 MiB so that
// RLIMIT_FSIZE does not stop it first, and reports how many it managed.
func fillTmp(limit int64) (int64, string) {
	dir, err := os.MkdirTemp("/tmp", "fill-")
	if err != nil {
		return 0, err.Error()
	}
	defer os.RemoveAll(dir)
	chunk := bytes.Repeat([]byte{0xA5}, 1<<20)
	var n int64
	for i := 0; n < limit; i++ {
		f, err := os.Create(fmt.Sprintf("%s/%d", dir, i))
		if err != nil {
			return n, err.Error()
		}
		for j := 0; j < 32 && n < limit; j++ {
			k, err := f.Write(chunk)
			n += int64(k)
			if err != nil {
				f.Close()
				if errors.Is(err, syscall.ENOSPC) {
					return n, "ENOSPC"
				}
				return n, err.Error()
			}
		}
		f.Close()
	}
	return n, ""
}

func firstLines(s string, n int) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() && len(out) < n {
		out = append(out, sc.Text())
	}
	return strings.Join(out, "\n")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
