package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/fetch"
	"github.com/renderbox/renderbox/jobstate"
)

// Event is a job's progress, written by a worker and applied to the ledger
// by the API.
type Event struct {
	JobID        string         `json:"job_id"`
	State        jobstate.State `json:"state"` // running, queued (given back by a draining worker), succeeded, failed, canceled
	ErrorCode    string         `json:"error_code,omitempty"`
	ErrorMessage string         `json:"error_message,omitempty"`
	Outputs      []Output       `json:"outputs,omitempty"`
	At           time.Time      `json:"at"`
	// StartedAt, on an end, is the At of the attempt's running event
	// (zero when the job ended before one): the ledger counts the attempt
	// from it when that event was not applied first.
	StartedAt time.Time `json:"started_at,omitzero"`
	Worker    string    `json:"worker,omitempty"`
	// RootfsDigest is the digest of the rootfs tree the worker verified at
	// start and runs every sandbox on.
	RootfsDigest string `json:"rootfs_digest,omitempty"`
	// SandboxMode is how the job's sandbox was made: cold, prebooted or
	// restored. A running event that carries it is sent once the attempt
	// took its sandbox, after the one that began the attempt, and repeats
	// that one's At.
	SandboxMode string `json:"sandbox_mode,omitempty"`
	// Diagnostics is what the job's page asked for and could not have,
	// and the errors it logged; nil when nothing.
	Diagnostics *Diagnostics `json:"diagnostics,omitempty"`
}

// Diagnostics is what a page did that its client should know: the first
// requests refused (another origin or scheme), the first same-origin
// requests for files the job does not have, the first console errors and
// uncaught exceptions. Each list is bounded by the agent.
type Diagnostics struct {
	RefusedRequests []string `json:"refused_requests,omitempty"`
	MissingFiles    []string `json:"missing_files,omitempty"`
	ConsoleErrors   []string `json:"console_errors,omitempty"`
	// Fetched lists what the host fetched for a URL page, and refused,
	// in order (the first 100).
	Fetched []fetch.Record `json:"fetched,omitempty"`
	// Steps lists the sandboxes of a job that runs in several (safe-pdf),
	// in order, up to the one that ended it.
	Steps []Step `json:"steps,omitempty"`
	// Size is what a renderer that makes a document smaller (pdf-optimize)
	// took in and gave back: its step's, in a chain.
	Size *SizeChange `json:"size,omitempty"`
	// Deliveries lists the uploads to the client's storage, one per
	// output delivered (destinations without their query strings).
	Deliveries []deliver.Record `json:"deliveries,omitempty"`
}

// SizeChange is a document's size before and after a step that makes it
// smaller.
type SizeChange struct {
	InputBytes  int64 `json:"input_bytes"`
	OutputBytes int64 `json:"output_bytes"`
	// SavedPercent is how much smaller the output is, in percent of the
	// input (0 when it came back unchanged), to one decimal.
	SavedPercent float64 `json:"saved_percent"`
}

// NewSizeChange is in and out's change.
func NewSizeChange(in, out int64) *SizeChange {
	saved := 0.0
	if in > 0 && out < in {
		saved = math.Round(1000*float64(in-out)/float64(in)) / 10
	}
	return &SizeChange{InputBytes: in, OutputBytes: out, SavedPercent: saved}
}

// Step is one sandbox run of a job that takes several.
type Step struct {
	Name        string  `json:"name"`
	Outcome     string  `json:"outcome"`
	SandboxMode string  `json:"sandbox_mode,omitempty"`
	Seconds     float64 `json:"seconds"` // from its sandbox's creation (or the pool's hand-over) to its result
}

// Output is an output file a worker stored.
type Output struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	MediaType string `json:"media_type"`
}

// Publish appends ev to the event stream.
func (q *Queue) Publish(ctx context.Context, ev Event) error {
	args, err := eventArgs(ev)
	if err != nil {
		return err
	}
	return q.rdb.XAdd(ctx, args).Err()
}

func eventArgs(ev Event) (*redis.XAddArgs, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return &redis.XAddArgs{Stream: EventStream, MaxLen: 100_000, Approx: true, Values: map[string]any{"event": b}}, nil
}

// doneKey marks a job whose terminal event a worker published.
func doneKey(job string) string { return prefix + "done:" + job }

// PublishEnd appends a job's terminal event to the stream and, in the same
// transaction, marks the job done for ttl (the job's retention; the
// queue's when 0). A worker that dies after this and before asynq hears
// the task is done has its task handed out again; Ended tells the next
// worker the job already ended, so it is not run a second time.
func (q *Queue) PublishEnd(ctx context.Context, ev Event, ttl time.Duration) error {
	args, err := eventArgs(ev)
	if err != nil {
		return err
	}
	if ttl <= 0 {
		ttl = cmp.Or(q.Retention, 24*time.Hour)
	}
	_, err = q.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, doneKey(ev.JobID), string(ev.State), ttl)
		pipe.XAdd(ctx, args)
		return nil
	})
	return err
}

// Ended returns the terminal state a worker published for job, "" if none.
func (q *Queue) Ended(ctx context.Context, job string) (jobstate.State, error) {
	s, err := q.rdb.Get(ctx, doneKey(job)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return jobstate.State(s), err
}

// EndedChannel carries the id of every job whose terminal event an API
// replica applied to the ledger, so that every replica wakes its ?wait=
// requests for it, not only the one that applied it.
const EndedChannel = prefix + "ended"

// PublishEnded tells every replica that job's terminal state is in the
// ledger.
func (q *Queue) PublishEnded(ctx context.Context, job string) error {
	return q.rdb.Publish(ctx, EndedChannel, job).Err()
}

// WatchEnded calls fn with the id of every job announced by PublishEnded
// from now on, until ctx ends. A notice sent while this replica was away
// from Redis is lost: a waiter must not rely on it alone.
func (q *Queue) WatchEnded(ctx context.Context, fn func(job string)) {
	q.watch(ctx, EndedChannel, fn)
}
