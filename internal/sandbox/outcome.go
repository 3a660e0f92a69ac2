package sandbox

import (
	"errors"
	"fmt"
)

// Outcome classifies how a sandboxed job ended. The values are part of the
// public API (a failed job's error.code).
type Outcome string

const (
	Succeeded      Outcome = "succeeded"
	RenderFailed   Outcome = "render_failed"   // the renderer exited non-zero or could not run
	Timeout        Outcome = "timeout"         // the host's deadline passed
	MemoryLimit    Outcome = "memory_limit"    // the memory cgroup (or gVisor's own OOM) killed it
	OutputLimit    Outcome = "output_limit"    // more output than allowed
	SandboxFailure Outcome = "sandbox_failure" // runsc itself failed; retryable
	Canceled       Outcome = "canceled"        // the job's context was canceled
)

// Retryable reports whether the same job may succeed if run again.
func (o Outcome) Retryable() bool { return o == SandboxFailure }

// Error is a job that did not succeed. Its Outcome is never Succeeded.
type Error struct {
	Outcome Outcome
	// Msg says what happened, for the job's error message.
	Msg string
	// Stderr is the tail of the renderer's output, when it ran.
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	s := string(e.Outcome) + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// OutcomeOf returns the outcome err stands for: Succeeded for nil,
// SandboxFailure for errors that are not an *Error.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Succeeded
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Outcome
	}
	return SandboxFailure
}

func fail(o Outcome, err error, format string, args ...any) *Error {
	return &Error{Outcome: o, Msg: fmt.Sprintf(format, args...), Err: err}
}
