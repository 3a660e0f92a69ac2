// Package queue is the glue between the API and the workers, all in
// Redis: render tasks go through asynq (the job id is the TaskID), inputs
// and outputs are blobs with a retention TTL (in Redis, or in the object
// store of blobs.Store the binaries name), results come back as events
// on a Redis stream that the API replicas consume into the ledger (one
// consumer group; what one cannot apply is retried by another, and given
// up to a dead-letter stream after a bound: consume.go), a job's end is
// announced to every replica on a channel, cancels are a
// marker key plus a pub/sub nudge to whichever worker runs the job, and
// workers' heartbeats say who is alive. Both binaries reach Redis through
// RedisConfig (connect.go).
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/blobs"
	"github.com/renderbox/renderbox/internal/deliver"
)

// TypeRender is the asynq task type of a render job; QueueName its queue.
const (
	TypeRender = "render:job"
	QueueName  = "default"
)

// Redis names.
const (
	prefix        = "renderbox:"
	EventStream   = prefix + "events"
	CancelChannel = prefix + "cancel"
)

// InputKey, OutputKey and cancelKey name a job's Redis keys.
func InputKey(job string) string        { return prefix + "blob:" + job + ":input" }
func OutputKey(job, name string) string { return prefix + "blob:" + job + ":out:" + name }
func cancelKey(job string) string       { return prefix + "cancel:" + job }

// Payload is a render task.
type Payload struct {
	JobID    string          `json:"job_id"`
	Owner    string          `json:"owner"`
	Renderer string          `json:"renderer"`
	Options  json.RawMessage `json:"options,omitempty"`
	Limits   json.RawMessage `json:"limits,omitempty"`
	// InputType is the client's declared input type, "" if none.
	InputType string `json:"input_type,omitempty"`
	// OutputName is the client's validated base name for the outputs
	// ("" keeps the renderer's names); the worker checks it again.
	OutputName string `json:"output_name,omitempty"`
	// Accepted is when the API accepted the job (for queue-wait metrics).
	Accepted time.Time `json:"accepted"`
	// Retention is how long the job's outputs are kept: the API's
	// -retention, which the worker does not otherwise know.
	Retention time.Duration `json:"retention,omitempty"`
	// RequestID is the id of the request that submitted the job (the
	// API's X-Request-Id), so the worker's log lines for the job carry it.
	RequestID string `json:"request_id,omitempty"`
	// TraceParent is the W3C traceparent of the span that queued the job
	// (internal/tracing), so the worker's spans join the job's trace; ""
	// when the API does not trace.
	TraceParent string `json:"traceparent,omitempty"`
	// Deliver is where the outputs go besides the store (internal/deliver),
	// nil for nowhere. Its URLs are secrets: only the task carries them,
	// never the ledger, an event or a log line.
	Deliver *deliver.Spec `json:"deliver,omitempty"`
}

// Queue wraps one Redis connection for every use.
type Queue struct {
	rdb       redis.UniversalClient
	client    *asynq.Client
	inspector *asynq.Inspector
	// Retention is how long blobs, cancel markers and finished tasks live.
	Retention time.Duration
	// Blobs holds inputs and outputs: Redis itself (New's default) or an
	// object store (UseBlobs), with which Redis holds no document bytes.
	Blobs blobs.Store
}

// New returns a Queue on rdb. Retention defaults to 24h.
func New(rdb redis.UniversalClient, retention time.Duration) *Queue {
	if retention == 0 {
		retention = 24 * time.Hour
	}
	q := &Queue{
		rdb:       rdb,
		client:    asynq.NewClientFromRedisClient(rdb),
		inspector: asynq.NewInspectorFromRedisClient(rdb),
		Retention: retention,
	}
	q.Blobs = redisBlobs{rdb}
	return q
}

// UseBlobs keeps inputs and outputs in s rather than in Redis.
func (q *Queue) UseBlobs(s blobs.Store) { q.Blobs = s }

// BlobsInRedis reports whether blobs are Redis keys (SubmitInput then
// writes the input in the submission's own round trip, and inputs count
// against Redis's memory).
func (q *Queue) BlobsInRedis() bool {
	_, ok := q.Blobs.(redisBlobs)
	return ok
}

// Redis returns the underlying client.
func (q *Queue) Redis() redis.UniversalClient { return q.rdb }

// Ping checks Redis.
func (q *Queue) Ping(ctx context.Context) error { return q.rdb.Ping(ctx).Err() }

// ErrDuplicate means a task with the job's id is already queued.
var ErrDuplicate = errors.New("job already enqueued")

// Enqueue queues p. timeout bounds one attempt (asynq kills the handler's
// context after it); the sandbox's own, shorter deadline fires first.
func (q *Queue) Enqueue(ctx context.Context, p Payload, timeout time.Duration, maxRetry int) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = q.client.EnqueueContext(ctx, asynq.NewTask(TypeRender, b),
		asynq.TaskID(p.JobID), asynq.Queue(QueueName), asynq.Timeout(timeout),
		asynq.MaxRetry(maxRetry), asynq.Retention(q.Retention))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return ErrDuplicate
	}
	if err != nil {
		return fmt.Errorf("enqueueing job %s: %w", p.JobID, err)
	}
	return nil
}

// Depth is how many jobs wait (in their key's list or in asynq) or run:
// the bound the API enforces. It reads asynq's per-queue lists and sets
// directly (one round trip), since the inspector's queue info also samples
// memory use, too slow for every submission.
func (q *Queue) Depth(ctx context.Context) (int, error) {
	pipe := q.rdb.Pipeline()
	lens := q.depthCmds(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	n := 0
	for _, l := range lens {
		n += int(l.Val())
	}
	return n, nil
}

// depthCmds queues on pipe the reads whose sum is Depth.
func (q *Queue) depthCmds(ctx context.Context, pipe redis.Pipeliner) []*redis.IntCmd {
	k := "asynq:{" + QueueName + "}:"
	return []*redis.IntCmd{pipe.LLen(ctx, k+"pending"), pipe.LLen(ctx, k+"active"), pipe.ZCard(ctx, k+"scheduled"), pipe.ZCard(ctx, k+"retry"),
		pipe.HLen(ctx, specsKey), pipe.HLen(ctx, movingKey)}
}

// PutBlob stores data under key for the retention period.
func (q *Queue) PutBlob(ctx context.Context, key string, data []byte) error {
	return q.PutBlobFor(ctx, key, data, q.Retention)
}

// PutBlobFor stores data under key for ttl (the queue's retention when
// ttl is zero): a worker keeps a job's outputs for the retention the API
// put in its payload.
func (q *Queue) PutBlobFor(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = q.Retention
	}
	return q.Blobs.Put(ctx, key, data, ttl)
}

// ErrNoBlob means the blob does not exist (never written, or expired).
var ErrNoBlob = blobs.ErrNotFound

// GetBlob reads a blob.
func (q *Queue) GetBlob(ctx context.Context, key string) ([]byte, error) {
	return q.Blobs.Get(ctx, key)
}

// OpenBlob returns a reader of the blob at key, or ErrNoBlob.
func (q *Queue) OpenBlob(ctx context.Context, key string) (blobs.Blob, error) {
	return q.Blobs.Open(ctx, key)
}

// Cancel marks job canceled, takes it out of its key's list or removes
// its task if it has not started, and tells the workers, one of which may
// be running it.
func (q *Queue) Cancel(ctx context.Context, job string) error {
	if err := q.rdb.Set(ctx, cancelKey(job), "1", q.Retention).Err(); err != nil {
		return fmt.Errorf("marking job %s canceled: %w", job, err)
	}
	if waiting, err := q.withdraw(ctx, job); err != nil {
		return fmt.Errorf("withdrawing job %s: %w", job, err)
	} else if waiting {
		return nil // it never reached asynq: no task, no worker
	}
	if err := q.inspector.DeleteTask(QueueName, job); err != nil &&
		!errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
		// An active task cannot be deleted; the worker learns below.
		_ = err
	}
	return q.rdb.Publish(ctx, CancelChannel, job).Err()
}

// Canceled reports whether job was canceled.
func (q *Queue) Canceled(ctx context.Context, job string) (bool, error) {
	n, err := q.rdb.Exists(ctx, cancelKey(job)).Result()
	return n > 0, err
}

// WatchCancels calls fn with the id of every job canceled from now on,
// until ctx ends.
func (q *Queue) WatchCancels(ctx context.Context, fn func(job string)) {
	q.watch(ctx, CancelChannel, fn)
}

// watch calls fn with every message on channel until ctx ends. go-redis
// subscribes again after a lost connection; what was sent meanwhile is
// lost.
func (q *Queue) watch(ctx context.Context, channel string, fn func(string)) {
	sub := q.rdb.Subscribe(ctx, channel)
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			fn(m.Payload)
		}
	}
}
