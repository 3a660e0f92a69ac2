package ledger

import (
	"fmt"

	"github.com/renderbox/renderbox/jobstate"
)

// checkState refuses a state that is not one of jobstate's five.
func checkState(s jobstate.State) error {
	if !s.Valid() {
		return fmt.Errorf("unknown job state %q (want one of queued, running, succeeded, failed, canceled): %w", string(s), ErrInvalid)
	}
	return nil
}

// ErrorCodeCanceled is the error code of a canceled job.
const ErrorCodeCanceled = "canceled"
