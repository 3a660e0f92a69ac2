package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Redis outages. Every Redis call a job makes (the cancel marker, the
// "running" event, the input, the outputs, the result event) goes through
// withRedis, which retries it until Redis answers or the attempt's context
// ends. With -blobs s3://… the input and outputs go to the object store
// instead, through the same wait: a store that is away holds the job the
// same way, and its outputs are stored before it is reported succeeded.
//
// Why wait rather than fail the attempt: when Redis is away (a restart, a
// failover) a failed attempt cannot even be recorded as failed — asynq's
// move to retry fails too — so the task sits in "active" until its lease
// lapses and asynq's recoverer hands it out again a minute or two later.
// The render's result is thrown away and the job runs again, for a blip
// that lasted seconds. Waiting is safe for as long as the attempt's
// context lives: asynq ends that context when the task's 30s lease lapses
// (it extends the lease every few seconds once Redis answers again), when
// the task's deadline passes, and the worker ends it at shutdown. Past
// that point the task belongs to the recoverer, and giving up is right.

// Retry pacing while Redis is unreachable, and the bound on one call.
const (
	redisRetryFirst = 100 * time.Millisecond
	redisRetryMax   = 2 * time.Second
	redisCallLimit  = 10 * time.Second
)

// withRedis runs fn until it succeeds or ctx ends. The first call runs even
// if ctx has already ended (a result is still reported after a cancel or a
// shutdown, as before), on a context of its own bounded by redisCallLimit.
// what says what fn does, for logs and errors ("storing the outputs").
func (h *Handler) withRedis(ctx context.Context, log *slog.Logger, what string, fn func(context.Context) error) error {
	wait := redisRetryFirst
	var since time.Time
	for tries := 1; ; tries++ {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisCallLimit)
		err := fn(cctx)
		cancel()
		if err == nil {
			if tries > 1 {
				log.Info("redis (or the object store) answers again", "doing", what, "tries", tries, "waited_seconds", time.Since(since).Seconds())
			}
			return nil
		}
		if tries == 1 {
			since = time.Now()
			log.Warn("redis (or the object store) failed; retrying while the task's lease holds", "doing", what, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (gave up after %d tries: %v)", what, err, tries, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, redisRetryMax)
	}
}
