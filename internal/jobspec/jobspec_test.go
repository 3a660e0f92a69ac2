package jobspec

import (
	"testing"
	"time"
)

// RLIMIT_NPROC follows from the pids limit so that the renderer's tasks,
// two host tasks per process under systrap, fit under it.
func TestTasksFitUnderThePidsLimit(t *testing.T) {
	for _, pids := range []int64{96, 256, 512, 1024} {
		n := Limits{Pids: pids}.WithDefaults().NProc
		if host := 2*int64(n) + 32; host > pids || n < 16 {
			t.Errorf("pids %d: RLIMIT_NPROC %d would hold up to %d host tasks", pids, n, host)
		}
	}
	if n := (Limits{Pids: 128, NProc: 300}).WithDefaults().NProc; n != 300 {
		t.Errorf("an explicit RLIMIT_NPROC became %d", n)
	}
}

// Limits are resolved once where they enter and handed on resolved: a
// second resolution changes nothing, and what is set is kept.
func TestDefaultsResolveOnce(t *testing.T) {
	for _, l := range []Limits{{}, {Timeout: time.Second, Pids: 100}, {MemoryBytes: 1 << 20, MaxPages: 3}} {
		once := l.WithDefaults()
		if twice := once.WithDefaults(); twice != once {
			t.Errorf("%+v: resolved again %+v, want %+v", l, twice, once)
		}
		if once.Timeout == 0 || once.MemoryBytes == 0 || once.CPUs == 0 || once.Pids == 0 || once.TmpBytes == 0 ||
			once.MaxOutputBytes == 0 || once.MaxOutputFiles == 0 || once.NoFile == 0 || once.NProc == 0 {
			t.Errorf("%+v: resolved %+v leaves a zero", l, once)
		}
		if l.Timeout != 0 && once.Timeout != l.Timeout || l.MaxPages != once.MaxPages {
			t.Errorf("%+v: resolved %+v changed what was set", l, once)
		}
	}
}
