package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/renderbox/renderbox/jobstate"
)

// Job is the durable record of one render job.
type Job struct {
	ID    string // job_<hex>; CreateJob fills it in when empty
	Owner string // the id of the key that created the job

	Renderer       string
	Options        json.RawMessage // renderer options as JSON; CreateJob stores {} when empty
	Limits         json.RawMessage // the validated limit request as JSON; CreateJob stores {} when empty
	InputSHA256    string          // hex digest of the input bytes
	InputSize      int64
	InputType      string // the media type the input was taken as
	CallbackURL    string
	OutputName     string // the client's base name for the outputs; "" keeps the renderer's
	IdempotencyKey string // "" when the client sent none
	RequestID      string // the id of the request that submitted the job (X-Request-Id); "" for none
	TraceParent    string // the W3C traceparent of the job's intake span (internal/tracing); "" when not traced
	// SecretsDigest is a keyed digest of what the record leaves out (the
	// options' secrets, the delivery destination), for Differs; "" when
	// not known (no master secret, or a job from before migration 0011).
	SecretsDigest string

	State        jobstate.State
	ErrorCode    string // set when State is failed or canceled
	ErrorMessage string
	Attempts     int // how many times a worker started the job
	// SandboxMode is how the sandbox of the job's last attempt was made:
	// cold, prebooted or restored; "" until that attempt took one
	// (MarkSandbox), and on an end before any sandbox.
	SandboxMode string
	// Worker is the name of the worker that reported the job's end, and
	// RootfsDigest the digest of the rootfs tree it ran; "" when no worker
	// ended it.
	Worker       string
	RootfsDigest string

	// Diagnostics is what the job's page asked for and could not have, and
	// the errors it logged: a JSON object, nil when there is nothing.
	Diagnostics json.RawMessage

	CreatedAt  time.Time // CreateJob uses the current time when zero
	StartedAt  time.Time // start of the latest attempt; zero until one starts
	FinishedAt time.Time // zero until the job is terminal
	Outputs    []Output
}

// Output is one file a job produced, as listed in its manifest.
type Output struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	MediaType string `json:"media_type"`
}

// Page sizes of ListJobs.
const (
	DefaultListLimit = 20
	MaxListLimit     = 100
)

// ListOptions selects a page of ListJobs.
type ListOptions struct {
	State  jobstate.State // only jobs in this state; "" for all
	Cursor string         // the next cursor of the previous page; "" for the first
	Limit  int            // page size; <= 0 means DefaultListLimit, above MaxListLimit means MaxListLimit
}

// FinishOptions is the terminal record of a job.
type FinishOptions struct {
	State        jobstate.State // succeeded, failed or canceled
	ErrorCode    string         // required for failed; defaults to "canceled" for canceled; empty for succeeded
	ErrorMessage string
	Outputs      []Output
	At           time.Time       // finish time; the current time when zero
	SandboxMode  string          // cold, prebooted, restored; "" when no sandbox ran
	Diagnostics  json.RawMessage // a JSON object, or nil
	Worker       string          // the worker's name; "" when none ran the job
	RootfsDigest string          // the digest of the rootfs tree the worker ran
	// StartedAt is the start of the attempt that ended, as its running
	// event said; zero when none started (canceled while queued). An
	// attempt whose running event was not applied — the replica holding it
	// died, and the end was applied first — is counted here, once.
	StartedAt time.Time
}

func (o FinishOptions) check() error {
	if !o.State.Terminal() {
		return fmt.Errorf("finish state %q is not terminal (use succeeded, failed or canceled): %w", string(o.State), ErrInvalid)
	}
	switch {
	case o.State == jobstate.Failed && o.ErrorCode == "":
		return fmt.Errorf("a failed job needs an error code (e.g. internal, render_failed): %w", ErrInvalid)
	case o.State == jobstate.Succeeded && o.ErrorCode != "":
		return fmt.Errorf("a succeeded job cannot carry error code %q (finish it as failed): %w", o.ErrorCode, ErrInvalid)
	}
	return nil
}
