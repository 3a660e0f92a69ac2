// Package ledger is renderbox's durable record: API keys (stored hashed) and
// one row per job with its owner, renderer, options, input digest, state,
// error, timings and output manifest.
//
// The Store interface is what the API and the worker use. SQLite (pure Go,
// modernc.org/sqlite) is the embedded implementation for one host;
// PostgreSQL (pgx) backs several API replicas. OpenStore picks one by the
// DSN: a postgres:// URL or a file path. Both run the same SQL (sql_*.go)
// with what differs in a dialect, and the same tests.
//
// Two rules hold whatever backs the store:
//   - a key sees only its own jobs: another key's job is ErrNotFound, never
//     ErrUnauthorized, so ids cannot be probed;
//   - a job reaches exactly one terminal state: Finish and Cancel are
//     conditional updates, and only the first of any race wins.
package ledger

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Returned errors wrap them with what was being done; test
// with errors.Is.
var (
	// ErrNotFound: no such job or key, or a job owned by another key.
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: the API key is malformed, unknown, wrong or revoked.
	// Which one is deliberately not said.
	ErrUnauthorized = errors.New("invalid or revoked api key")
	// ErrConflict: the request contradicts the record's current state,
	// e.g. canceling a job that already finished.
	ErrConflict = errors.New("conflicts with the current state")
	// ErrBadCursor: a ListJobs cursor that this store did not produce.
	ErrBadCursor = errors.New("invalid list cursor (pass back the next cursor of a previous page unchanged)")
	// ErrInvalid: an argument the store cannot accept (missing owner,
	// unknown state, options that are not JSON...). The message names it.
	ErrInvalid = errors.New("invalid argument")
)

// Backlog is what waits in the ledger.
type Backlog struct {
	// OldestQueued is when the oldest job still queued was accepted;
	// zero when none is.
	OldestQueued time.Time
	// WebhooksPending is how many webhooks wait for a delivery attempt
	// (due now or retrying later).
	WebhooksPending int
}

// JobMark is a place in the jobs' acceptance order: a job's CreatedAt and
// ID.
type JobMark struct {
	CreatedAt time.Time
	ID        string
}

// Store is the ledger's interface. Every method is safe for concurrent use.
type Store interface {
	// CreateKey makes a new API key named name and returns its secret,
	// which is shown once and never stored: only its sha256 is kept.
	CreateKey(ctx context.Context, name string) (secret string, key Key, err error)
	// CreateAdminKey is CreateKey for a key that may also call the
	// operator's routes (Key.Admin).
	CreateAdminKey(ctx context.Context, name string) (secret string, key Key, err error)
	// Authenticate returns the live key a secret belongs to, or an error
	// wrapping ErrUnauthorized.
	Authenticate(ctx context.Context, secret string) (Key, error)
	// RevokeKey stops a key from authenticating. Revoking twice is not an
	// error; an unknown id is ErrNotFound.
	RevokeKey(ctx context.Context, id string) error
	// ListKeys returns every key, revoked ones included, oldest first.
	ListKeys(ctx context.Context) ([]Key, error)

	// CreateJob records a queued job. When the owner already has a job with
	// the same IdempotencyKey, that job is returned with created=false.
	CreateJob(ctx context.Context, j Job) (job Job, created bool, err error)
	// GetJob returns owner's job id, or ErrNotFound.
	GetJob(ctx context.Context, owner, id string) (Job, error)
	// ListJobs returns a page of owner's jobs, newest first, and the cursor
	// of the next page ("" after the last page).
	ListJobs(ctx context.Context, owner string, opts ListOptions) (jobs []Job, next string, err error)
	// MarkRunning records that an attempt of job id started at at. It
	// reports false, changing nothing, when the job is already terminal
	// or this start (the same at) is already recorded.
	MarkRunning(ctx context.Context, id string, at time.Time) (bool, error)
	// MarkSandbox records mode, how the sandbox that the attempt started
	// at started took was made (cold, prebooted, restored), while that
	// attempt runs; applied before the attempt's MarkRunning, it records
	// the start as well. It reports false, changing nothing, when the job
	// is terminal, the attempt was given back or a later one started, or
	// the mode is already recorded.
	MarkSandbox(ctx context.Context, id string, started time.Time, mode string) (bool, error)
	// MarkQueued records that the attempt that started at or before at was
	// given back to the queue (its worker drained) and the job waits for
	// another. It reports false, changing nothing, unless the job is
	// running an attempt that started no later than at: a later attempt
	// already recorded, or an end, stands.
	MarkQueued(ctx context.Context, id string, at time.Time) (bool, error)
	// Finish moves a job that is not yet terminal to a terminal state. It
	// reports false, changing nothing, when the job is already terminal.
	Finish(ctx context.Context, id string, opts FinishOptions) (bool, error)
	// Cancel moves owner's queued or running job to canceled. An already
	// terminal job is returned unchanged with an error wrapping ErrConflict.
	Cancel(ctx context.Context, owner, id string) (Job, error)

	// GetWebhook returns the webhook record of owner's job id, or
	// ErrNotFound when the job has none (yet).
	GetWebhook(ctx context.Context, owner, id string) (Webhook, error)
	// ClaimWebhooks takes up to limit pending webhooks due at now, counts
	// an attempt for each and hides them from other claims for lease.
	ClaimWebhooks(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]WebhookClaim, error)
	// RecordWebhook stores the outcome of a claimed attempt. It reports
	// false, changing nothing, when the claim is stale (the lease ran out
	// and another attempt began) or the webhook is no longer pending.
	RecordWebhook(ctx context.Context, jobID string, a WebhookAttempt) (bool, error)

	// Backlog says what waits: the oldest queued job and the webhooks
	// not yet delivered or given up (for the operator's metrics).
	Backlog(ctx context.Context) (Backlog, error)
	// Unfinished returns up to limit jobs still queued or running that
	// were accepted before before, oldest first, strictly after the job
	// after (the last one of a previous call; the zero JobMark starts from
	// the oldest). The API's reconciler walks it to find jobs the queue
	// lost (Server.RunQueue).
	Unfinished(ctx context.Context, after JobMark, before time.Time, limit int) ([]Job, error)

	// Ping checks that the store answers (for /readyz).
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}
