package bench

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hostCosts is what a kernel transition costs on this host, measured
// natively at the start of a run. A sandboxed job makes many: under
// systrap every system call of the renderer is a signal, a hand-off to the
// Sentry and back, and the Sentry's own calls to the host; every fault on
// its memory is a host fault. The same machine has run make bench's
// sandboxed lines twice as slowly from one day to the next while its
// native runs moved far less, so a line is read beside this one.
type hostCosts struct {
	Cores int
	// SyscallNs is one getppid, the cheapest system call.
	SyscallNs float64
	// SwitchUs is one round trip between two threads on the same core
	// over two pipes: two writes, two reads and two context switches (perf
	// bench sched pipe's measure, pinned). On one core, so that it does not
	// depend on whether the other cores are busy.
	SwitchUs float64
}

// measureHost takes the best of three rounds of each measure, so that a
// burst of other work does not decide it.
func measureHost() (hostCosts, error) {
	h := hostCosts{Cores: runtime.NumCPU()}
	var sys, rt []float64
	for range 3 {
		sys = append(sys, syscallNs(200_000))
		us, err := roundTripUs(10_000)
		if err != nil {
			return h, err
		}
		rt = append(rt, us)
	}
	h.SyscallNs, h.SwitchUs = round2(slices.Min(sys)), round2(slices.Min(rt))
	return h, nil
}

func syscallNs(n int) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.Now()
	for range n {
		syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
	}
	return float64(time.Since(t).Nanoseconds()) / float64(n)
}

// roundTripUs bounces a byte between two threads, each locked to its own
// OS thread, both pinned to the first core, blocking in read, n times.
func roundTripUs(n int) (float64, error) {
	var fds [2][2]int // two pipes: [read end, write end]
	for i := range fds {
		if err := syscall.Pipe(fds[i][:]); err != nil {
			return 0, err
		}
		defer syscall.Close(fds[i][0])
		defer syscall.Close(fds[i][1])
	}
	// The echo reads the first pipe and writes the second; the timed side
	// writes first. Raw blocking descriptors: the reads block their
	// threads in the kernel, as a sandbox's hand-offs do, rather than
	// parking in Go's poller.
	echoed := make(chan error, 1)
	go func() { echoed <- bounce(fds[0][0], fds[1][1], n, false) }()
	timed := make(chan error, 1)
	var d time.Duration
	go func() {
		t := time.Now()
		err := bounce(fds[1][0], fds[0][1], n, true)
		d = time.Since(t)
		timed <- err
	}()
	if err := errors.Join(<-timed, <-echoed); err != nil {
		return 0, fmt.Errorf("round trip: %w", err)
	}
	return float64(d.Microseconds()) / float64(n), nil
}

// bounce reads a byte from in and writes it to out, n times, writing
// first if first. Its thread is pinned to the first core and never handed
// back to the runtime: it exits with the goroutine.
func bounce(in, out, n int, first bool) error {
	runtime.LockOSThread()
	var one unix.CPUSet
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return err
	}
	buf := []byte{0}
	for i := range n {
		if !first || i > 0 {
			if _, err := syscall.Read(in, buf); err != nil {
				return err
			}
		}
		if _, err := syscall.Write(out, buf); err != nil {
			return err
		}
	}
	if first {
		_, err := syscall.Read(in, buf) // the last echo
		return err
	}
	return nil
}
