package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

// Every way a job can end in its sandbox, from what the host saw, to the
// outcome the job reports and what its message says.
func TestClassify(t *testing.T) {
	lim := Limits{Timeout: 5 * time.Second, MemoryBytes: 256 << 20, Pids: 128, MaxOutputBytes: 1 << 20, MaxOutputFiles: 10}.WithDefaults()
	answered := func(r wire.Result) *wire.Response { return &wire.Response{Result: r} }
	eof := fmt.Errorf("reading the response: %w", io.EOF)
	for _, tc := range []struct {
		name string
		e    ending
		want Outcome
		says string // in the message, the stderr or the cause
	}{
		{"ok", ending{resp: answered(wire.Result{})}, Succeeded, ""},
		{"timeout", ending{ended: Timeout}, Timeout, "within 5s"},
		{"timeout before the counters count", ending{ended: Timeout, counters: counters{OOMKills: 1}}, Timeout, "within 5s"},
		{"canceled", ending{ended: Canceled, cause: context.Canceled}, Canceled, "canceled"},
		{"host's output cap", ending{exchErr: fmt.Errorf("file 3: %w", wire.ErrOutputLimit)}, OutputLimit, "more than 1 MiB or 10 files"},
		{"agent's output limit", ending{resp: answered(wire.Result{OutputLimit: true, Error: "too many files"})}, OutputLimit, "too many files"},
		{"memory limit, no answer", ending{exchErr: eof, counters: counters{OOMKills: 1}}, MemoryLimit, "memory limit of 256 MiB"},
		{"memory limit, answered", ending{resp: answered(wire.Result{Signal: 9, MaxRSSKiB: 200 << 10}), counters: counters{OOMKills: 2}}, MemoryLimit, "killed at 200 MiB resident"},
		{"memory limit, a subverted agent says ok", ending{resp: answered(wire.Result{}), counters: counters{OOMKills: 1}}, MemoryLimit, "limit is 256 MiB"},
		{"pids limit, no answer", ending{exchErr: eof, counters: counters{PidsMax: 1}}, RenderFailed, "limit of 128 processes"},
		{"malformed answer", ending{exchErr: fmt.Errorf("frame: %w", wire.ErrProtocol), exited: true}, RenderFailed, "malformed response"},
		{"agent died with the job", ending{exchErr: eof, exited: true, exitStatus: 137, stderr: "agent: boom"}, RenderFailed, "exit status 137"},
		{"request never delivered", ending{exchErr: fmt.Errorf("%w: broken pipe", ErrNotDelivered), exited: true, exitStatus: 1}, SandboxFailure, "exit status 1"},
		{"no answer, no exit", ending{exchErr: eof, stderr: "runsc: gone"}, SandboxFailure, "exit status -1, stderr: runsc: gone"},
		{"SIGKILL the cgroup did not count", ending{resp: answered(wire.Result{Signal: 9, MaxRSSKiB: 10 << 10, StderrTail: "bye"})}, RenderFailed, "not by the memory limit: bye"},
		{"signal", ending{resp: answered(wire.Result{Signal: 11, StderrTail: "segfault"})}, RenderFailed, "signal 11: segfault"},
		{"exit status", ending{resp: answered(wire.Result{ExitCode: 2, StderrTail: "bad page"})}, RenderFailed, "status 2: bad page"},
		{"agent's error", ending{resp: answered(wire.Result{Error: "wait_for_selector never met"})}, RenderFailed, "wait_for_selector"},
	} {
		tc.e.limits = lim
		err := classify(tc.e)
		if got := OutcomeOf(err); got != tc.want {
			t.Errorf("%s: outcome %s (%v), want %s", tc.name, got, err, tc.want)
			continue
		}
		if err == nil {
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: %T, want *Error", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error()+e.Stderr, tc.says) {
			t.Errorf("%s: %q (stderr %q) does not say %q", tc.name, err, e.Stderr, tc.says)
		}
	}
}
