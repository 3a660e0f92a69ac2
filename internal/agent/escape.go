package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/renderbox/renderbox/internal/wire"
)

// EscapeArg runs the agent as the escape-attempt child: it acts as an
// exploited renderer would, from a separate process of the renderer's uid,
// and prints its attempts as JSON.
const EscapeArg = wire.EscapeArg

// runEscapes runs the escape attempts in a child process and returns them.
func (a *Agent) runEscapes() []wire.Attempt {
	cmd := exec.Command("/proc/self/exe", EscapeArg)
	var out bytes.Buffer
	cmd.Stdout = &out
	// Like a renderer: below the agent's process reserve, so exhausting
	// processes cannot take the agent down with it.
	if err := a.start(cmd); err != nil {
		return []wire.Attempt{{Name: "start", Error: err.Error()}}
	}
	_ = cmd.Wait()
	var as []wire.Attempt
	if err := json.Unmarshal(out.Bytes(), &as); err != nil {
		return []wire.Attempt{{Name: "decode", Error: err.Error()}}
	}
	return as
}

// EscapeAttempts is the child's side, its attempts written to out. Each
// attempt must fail or be contained; the host judges them.
func EscapeAttempts(out io.Writer) {
	var as []wire.Attempt
	try := func(name string, f func() (string, error)) {
		detail, err := f()
		a := wire.Attempt{Name: name, Detail: detail}
		if err != nil {
			a.Error = err.Error()
		}
		as = append(as, a)
	}
	try(wire.EscapePtrace, func() (string, error) {
		err := unix.PtraceAttach(1)
		if err == nil {
			_ = unix.PtraceDetach(1)
		}
		return "", err
	})
	try(wire.EscapeSignal, func() (string, error) {
		// A real SIGKILL: if it were allowed, the agent would die and the
		// report with it, which fails the check as loudly.
		return "", unix.Kill(1, unix.SIGKILL)
	})
	try(wire.EscapeWriteSys, writeSys)
	try(wire.EscapeExecTmp, execFromTmp)
	try(wire.EscapeFuse, openFuse)
	try(wire.EscapeReadMemory, func() (string, error) {
		_, err := os.ReadFile("/proc/1/mem")
		return "", err
	})
	try(wire.EscapeMount, func() (string, error) {
		return "", unix.Mount("none", "/tmp", "tmpfs", 0, "")
	})
	try(wire.EscapeSetuid, func() (string, error) {
		if err := syscall.Setuid(0); err != nil {
			return "", err
		}
		if os.Getuid() != 0 {
			return "", fmt.Errorf("uid is still %d", os.Getuid())
		}
		return "", nil
	})
	try(wire.EscapeSetuidBinary, func() (string, error) {
		// su and mount ship setuid-root in Debian; the rootfs build strips
		// the bit and noNewPrivileges would ignore it anyway.
		out, err := exec.Command("/bin/su", "-c", "id -u").CombinedOutput()
		if err != nil {
			return strings.TrimSpace(string(out)), err
		}
		if strings.TrimSpace(string(out)) != "0" {
			return strings.TrimSpace(string(out)), fmt.Errorf("not root")
		}
		return "", nil
	})
	try(wire.EscapeRawSocket, func() (string, error) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	})
	try(wire.EscapePacketSocket, func() (string, error) {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0x0300)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	})
	try(wire.EscapeWriteRootfs, func() (string, error) {
		return "", os.WriteFile("/usr/bin/renderbox-planted", []byte("x"), 0o755)
	})
	try(wire.EscapeWriteVarTmp, func() (string, error) {
		return "", os.WriteFile("/var/tmp/planted", []byte("x"), 0o644)
	})
	try(wire.EscapeHostProcesses, func() (string, error) {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return "", err
		}
		var pids []string
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, e.Name())
			}
		}
		cmd, _ := os.ReadFile("/proc/1/cmdline")
		detail := fmt.Sprintf("%d processes; pid 1 is %q", len(pids), strings.ReplaceAll(string(cmd), "\x00", " "))
		// Only the sandbox's own few processes, and pid 1 is our agent.
		if len(pids) <= 8 && strings.HasPrefix(string(cmd), "/usr/local/bin/renderbox-agent") {
			return detail, fmt.Errorf("only the sandbox's processes are visible")
		}
		return detail, nil
	})
	try(wire.EscapeHostDevice, func() (string, error) {
		f, err := os.OpenFile("/dev/sda", os.O_RDONLY, 0)
		if err == nil {
			f.Close()
		}
		return "", err
	})
	var procs []*os.Process
	try(wire.EscapeProcesses, func() (string, error) {
		// Fork sleepers until the limits stop us; success would be a
		// thousand of them.
		defer func() {
			for _, p := range procs {
				_ = p.Kill()
				_, _ = p.Wait()
			}
		}()
		deadline := time.Now().Add(5 * time.Second)
		for len(procs) < 1000 && time.Now().Before(deadline) {
			c := exec.Command("/bin/sleep", "30")
			if err := c.Start(); err != nil {
				return fmt.Sprintf("stopped after %d processes", len(procs)), err
			}
			procs = append(procs, c.Process)
		}
		return fmt.Sprintf("started %d processes", len(procs)), nil
	})
	as[len(as)-1].Processes = uint64(len(procs))
	var filled int64
	try(wire.EscapeFillTmp, func() (string, error) {
		// Write until the tmpfs's size= cap refuses; the host compares
		// the bytes with the limit. The files go again so the report
		// itself still fits.
		n, e := fillTmp(4 << 30)
		filled = n
		if e == "" {
			return fmt.Sprintf("wrote %d bytes", n), nil
		}
		return fmt.Sprintf("wrote %d bytes", n), errors.New(e)
	})
	as[len(as)-1].Bytes = filled
	_ = json.NewEncoder(out).Encode(as)
}

// writeSys, execFromTmp and openFuse are attempts the probe makes too
// (worker selftest). Each returns a detail and the error that stopped it.
func writeSys() (string, error) {
	return "", os.WriteFile("/sys/renderbox-planted", []byte("x"), 0o644)
}

func execFromTmp() (string, error) {
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		return "", fmt.Errorf("reading /bin/true: %w", err)
	}
	p := "/tmp/renderbox-planted"
	if err := os.WriteFile(p, b, 0o755); err != nil {
		return "", fmt.Errorf("copying: %w", err)
	}
	defer os.Remove(p)
	return "", exec.Command(p).Run()
}

func openFuse() (string, error) {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.Mode()&os.ModeCharDevice == 0 {
		return st.Mode().String(), errors.New("not a device")
	}
	return st.Mode().String(), nil
}
