package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// BusyError means another process holds a state dir's lock: a worker
// serving from it. Nothing that assumes it owns every sandbox there (the
// reaper) may run.
type BusyError struct {
	Dir string
	PID int // the holder's, as it wrote it; 0 if unknown
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("state dir %s is in use by a running worker (pid %d); give each worker its own -state-dir", e.Dir, e.PID)
}

// Lock takes the state dir's exclusive lock and holds it until unlock is
// called or the process exits (kill -9 included: the kernel drops it). A
// worker holds it while it serves. It fails at once with *BusyError when
// another process holds it.
func (m *Manager) Lock() (unlock func(), err error) {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	if m.lockFile != nil {
		return nil, errors.New("state dir lock: already held by this manager")
	}
	p := filepath.Join(m.cfg.StateDir, "lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(p)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &BusyError{Dir: m.cfg.StateDir, PID: pid}
		}
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	m.lockFile = f
	return func() {
		m.lockMu.Lock()
		defer m.lockMu.Unlock()
		if m.lockFile == f {
			m.lockFile = nil
			f.Close()
		}
	}, nil
}

// holdsLock reports whether this manager holds its state dir's lock.
func (m *Manager) holdsLock() bool {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	return m.lockFile != nil
}
