package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The process that runs sandboxes is their subreaper: `runsc create` and
// `runsc restore` exit once they have started the sandbox process and its
// gofer, so the two are handed to this process, which learns a sandbox's
// end and exit status from wait4 instead of a `runsc wait` per sandbox
// (docs/pool.md, "The subreaper", has what each status means and the
// cost this saves).
//
// Only pids handed over by watchPid are waited for: os/exec waits for its
// own children by pid, and a wait for any child would steal their
// statuses. The gofers and other helpers runsc leaves behind are reaped by
// name once they are zombies: runsc starts them through /proc/self/exe, so
// the kernel names them "exe", and nothing os/exec starts here has that
// name.
var adopted struct {
	once sync.Once
	err  error

	mu    sync.Mutex
	exits map[int]*exit
	kick  chan os.Signal
}

// exit is the end of one adopted sandbox process.
type exit struct {
	pid  int
	done chan struct{}
	ws   syscall.WaitStatus
	// orphan: the process was not this one's child to wait for (subreaper
	// refused, or runsc changed how it starts sandboxes); only its end is
	// known, by its pid going away.
	orphan bool
}

// adopt makes this process the subreaper of the sandboxes it starts. It is
// called before the first sandbox is made; later calls return the first
// result.
func adopt() error {
	adopted.once.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			adopted.err = fmt.Errorf("becoming the sandboxes' subreaper: %w", err)
			return
		}
		adopted.exits = map[int]*exit{}
		adopted.kick = make(chan os.Signal, 1)
		signal.Notify(adopted.kick, syscall.SIGCHLD)
		go func() {
			// SIGCHLD says a child ended; the tick catches what a
			// coalesced or missed signal did not say, and the gofers.
			tick := time.NewTicker(time.Second)
			for {
				sweep := false
				select {
				case <-adopted.kick:
				case <-tick.C:
					sweep = true
				}
				reapAdopted(sweep)
			}
		}()
	})
	return adopted.err
}

// watchPid starts waiting for the adopted sandbox process pid to end.
func watchPid(pid int) *exit {
	e := &exit{pid: pid, done: make(chan struct{})}
	adopted.mu.Lock()
	adopted.exits[pid] = e
	adopted.mu.Unlock()
	reapAdopted(false)
	return e
}

// reapAdopted waits, without blocking, for every watched sandbox process,
// and with sweep for the zombie helpers runsc left with this process.
func reapAdopted(sweep bool) {
	adopted.mu.Lock()
	defer adopted.mu.Unlock()
	for pid, e := range adopted.exits {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case got == pid:
			e.ws = ws
		case errors.Is(err, syscall.ECHILD):
			// Not ours to wait for: ended once its pid is gone.
			e.orphan = true
			if syscall.Kill(pid, 0) == nil {
				continue
			}
		default:
			continue
		}
		delete(adopted.exits, pid)
		close(e.done)
	}
	if sweep {
		for _, pid := range zombieHelpers() {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// zombieHelpers lists this process's children that are zombies named
// "exe" and not watched: gofers and what else runsc started and left.
func zombieHelpers() []int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var pids []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if _, watched := adopted.exits[pid]; watched {
				continue
			}
			st, err := os.ReadFile("/proc/" + f + "/stat")
			// "pid (comm) state …"
			if err == nil && strings.Contains(string(st), " (exe) Z ") {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// status is what the sandbox's end says of its container: the container's
// exit status, or an error wrapping ErrGone when gVisor did not live to
// say it.
func (e *exit) status() (int, error) {
	switch {
	case e.orphan:
		return -1, fmt.Errorf("%w (not this process's child)", ErrGone)
	case e.ws.Signaled():
		return -1, fmt.Errorf("%w (killed by %v)", ErrGone, e.ws.Signal())
	case e.ws.ExitStatus() == 128 || e.ws.ExitStatus() == 2:
		return -1, fmt.Errorf("%w (exit status %d: runsc or the Sentry failed)", ErrGone, e.ws.ExitStatus())
	}
	return e.ws.ExitStatus(), nil
}

// signal sends sig to the process unless it has been reaped: a reaped pid
// may already be another process's.
func (e *exit) signal(sig syscall.Signal) {
	adopted.mu.Lock()
	defer adopted.mu.Unlock()
	select {
	case <-e.done:
	default:
		_ = syscall.Kill(e.pid, sig)
	}
}
