package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Waking idle workers. asynq has no blocking dequeue: a worker whose
// dequeue finds nothing sleeps its TaskCheckInterval (-poll-interval) and
// asks again, so a job waited on average about half of that before it
// started, and every idle worker ran a dequeue script on Redis forty
// times a second. Now the dispatcher publishes on wakeChannel whenever it
// has moved jobs into asynq, and a worker's Waker holds an empty dequeue
// of asynq's in place, for up to MaxWait, until a wake comes; then it
// dequeues again at once. asynq's own sleep follows only a wait that
// timed out, so a job queued by anything that does not publish (a retry
// coming due, a task the recoverer gave back) still starts within
// MaxWait and a poll.
const wakeChannel = prefix + "wake"

// publishWake tells the waiting workers that asynq has new tasks. A wake
// lost (Redis away for a moment) costs a job at most a Waker's MaxWait,
// so its error is not the caller's.
func (q *Queue) publishWake(ctx context.Context) {
	_ = q.rdb.Publish(ctx, wakeChannel, "").Err()
}

// Waker is a go-redis hook for the client an asynq server dequeues with
// (AddHook): it holds that server's empty dequeues until a wake.
type Waker struct {
	// MaxWait bounds one hold of an empty dequeue.
	MaxWait time.Duration
	woken   chan struct{}
	done    chan struct{}
}

// ListenWake subscribes to the wakes on q's Redis and returns a Waker fed
// by them until ctx ends; from then on it holds nothing. Add it to the
// client the asynq server uses, before the server starts.
func (q *Queue) ListenWake(ctx context.Context, maxWait time.Duration) *Waker {
	w := &Waker{MaxWait: maxWait, woken: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		q.watch(ctx, wakeChannel, func(string) { w.wake() })
	}()
	return w
}

// wake lets one held dequeue go now, or the next one at once. A wake is
// kept until a dequeue takes it: one that comes while no dequeue is held
// (the worker was between two) is not lost, at worst it is one dequeue
// that finds nothing.
func (w *Waker) wake() {
	select {
	case w.woken <- struct{}{}:
	default:
	}
}

// DialHook is go-redis's; the Waker leaves dialing alone.
func (w *Waker) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook is go-redis's; asynq dequeues outside pipelines.
func (w *Waker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook holds asynq's dequeue of QueueName while it finds nothing,
// up to MaxWait, trying again at each wake. No connection is held while
// it waits: go-redis has returned it to the pool. The dequeue that finds
// a task after a wait sets the task's lease from the time asynq took
// before the first try, up to MaxWait short of its full duration; asynq's
// heartbeat extends the leases of running tasks every few seconds, long
// before that matters.
func (w *Waker) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if !errors.Is(err, redis.Nil) || !isDequeue(cmd) {
			return err
		}
		deadline := time.NewTimer(w.MaxWait)
		defer deadline.Stop()
		for errors.Is(err, redis.Nil) {
			select {
			case <-w.woken:
			case <-deadline.C:
				return err
			case <-w.done:
				return err
			case <-ctx.Done():
				return err
			}
			err = next(ctx, cmd)
		}
		return err
	}
}

// isDequeue tells asynq's dequeue of QueueName by its keys: a script
// (EVALSHA, or EVAL when Redis had not cached it) on the queue's pending,
// paused, active and lease keys, in that order. No other command asynq
// sends names those four; TestWakeStartsAJobAtOnce fails if a new asynq
// dequeues otherwise.
func isDequeue(cmd redis.Cmder) bool {
	name := strings.ToLower(cmd.Name())
	args := cmd.Args()
	if (name != "evalsha" && name != "eval") || len(args) < 7 || fmt.Sprint(args[2]) != "4" {
		return false
	}
	q := "asynq:{" + QueueName + "}:"
	for i, k := range []string{"pending", "paused", "active", "lease"} {
		if s, ok := args[3+i].(string); !ok || s != q+k {
			return false
		}
	}
	return true
}
