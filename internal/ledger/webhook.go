package ledger

import "time"

// WebhookState is where a job's webhook is.
type WebhookState string

// Webhook states: pending until the receiver takes it or the attempts are
// used up.
const (
	WebhookPending   WebhookState = "pending"
	WebhookDelivered WebhookState = "delivered"
	WebhookFailed    WebhookState = "failed"
)

// Webhook is the delivery record of a job's webhook, written when a job
// with a callback URL ends.
type Webhook struct {
	JobID      string
	URL        string
	State      WebhookState
	Attempts   int       // attempts started, including one in flight
	NextAt     time.Time // when the next attempt is due (pending only)
	LastStatus int       // HTTP status of the latest answer; 0 when none came
	LastError  string
	FinishedAt time.Time // zero while pending
}

// WebhookClaim is a due webhook a deliverer claimed, with the job it
// announces.
type WebhookClaim struct {
	Webhook
	Job Job
}

// WebhookAttempt is the outcome of one delivery attempt.
type WebhookAttempt struct {
	Attempt   int // the Attempts value of the claim
	Status    int // HTTP status; 0 when none came
	Error     string
	Delivered bool
	RetryAt   time.Time // when to try again; zero gives up (unless Delivered)
	At        time.Time // when the attempt ended; the current time when zero
}
