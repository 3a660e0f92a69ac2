package ledger

import "fmt"

// State is where a job is in its life.
type State string

// Job states. queued and running are live; the other three are terminal and
// final: a job reaches exactly one of them, once.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCanceled  State = "canceled"
)

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCanceled
}

// Valid reports whether s is one of the five states.
func (s State) Valid() bool {
	return s == StateQueued || s == StateRunning || s.Terminal()
}

func (s State) check() error {
	if !s.Valid() {
		return fmt.Errorf("unknown job state %q (want one of queued, running, succeeded, failed, canceled): %w", string(s), ErrInvalid)
	}
	return nil
}

// ErrorCodeCanceled is the error code of a canceled job.
const ErrorCodeCanceled = "canceled"
