package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fair dequeueing. asynq's queues are fixed when a worker starts and each
// is one FIFO, so a key that queues a thousand jobs would make every other
// key wait behind all of them. Instead a job first waits in its key's own
// list; a dispatcher, run by every API process, moves jobs round-robin
// across keys into asynq, keeping asynq's pending list no longer than the
// workers' total concurrency. Another key's first job then waits behind at
// most one job per worker slot.
//
// Every step that touches more than one key is a Lua script, so any number
// of API processes can submit, cancel and dispatch at once. Moving a job
// into asynq cannot share a script with asynq's own enqueue, so it is two
// steps: the script moves the job from its key's list to the "moving"
// hash, then the dispatcher enqueues it (the job id is the TaskID, so a
// repeat is refused) and drops it from "moving". A dispatcher that dies in
// between leaves the job in "moving", where any dispatcher finds it after
// reclaimAfter and enqueues it again.
const (
	fairPrefix = prefix + "fair:"
	// ringKey lists the keys (owners) with waiting jobs, in turn order.
	ringKey = fairPrefix + "ring"
	// specsKey maps a waiting job's id to its waitingJob JSON.
	specsKey = fairPrefix + "specs"
	// bytesKey maps an owner to the input bytes of its waiting jobs.
	bytesKey = fairPrefix + "bytes"
	// movingKey maps a job on its way into asynq to "<unix ms> <spec>".
	movingKey = fairPrefix + "moving"
	// listPrefix + owner is an owner's list of waiting job ids.
	listPrefix = fairPrefix + "jobs:"
	// asynqPending is asynq's list of tasks ready to run.
	asynqPending = "asynq:{" + QueueName + "}:pending"

	reclaimAfter = 5 * time.Second
)

// waitingJob is a job held back in its key's list: what Enqueue needs.
type waitingJob struct {
	Owner    string        `json:"owner"`
	Size     int64         `json:"size"`
	Payload  Payload       `json:"payload"`
	Timeout  time.Duration `json:"timeout"`
	MaxRetry int           `json:"max_retry"`
}

// submitScript appends a job to its owner's list. An owner whose list was
// empty goes to the head of the ring: a key that has been waiting for
// nothing is served next (like a new flow in fq_codel), so its first job
// waits only for the jobs already in asynq.
var submitScript = redis.NewScript(`
if redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3]) == 0 then return 0 end
local list = ARGV[5] .. ARGV[1]
if redis.call('RPUSH', list, ARGV[2]) == 1 then
  redis.call('LREM', KEYS[1], 0, ARGV[1])
  redis.call('LPUSH', KEYS[1], ARGV[1])
end
redis.call('HINCRBY', KEYS[3], ARGV[1], ARGV[4])
return 1
`)

// dispatchScript moves jobs round-robin across owners into "moving" while
// asynq's pending tasks plus the jobs moving number fewer than ARGV[1].
var dispatchScript = redis.NewScript(`
local room = tonumber(ARGV[1]) - redis.call('LLEN', KEYS[5]) - redis.call('HLEN', KEYS[4])
local out = {}
while room > 0 do
  local owner = redis.call('LPOP', KEYS[1])
  if not owner then break end
  local list = ARGV[3] .. owner
  local job = redis.call('LPOP', list)
  if redis.call('LLEN', list) > 0 then redis.call('RPUSH', KEYS[1], owner) end
  if job then
    local spec = redis.call('HGET', KEYS[2], job)
    if spec then
      redis.call('HDEL', KEYS[2], job)
      local size = tonumber(cjson.decode(spec).size) or 0
      if redis.call('HINCRBY', KEYS[3], owner, -size) <= 0 then redis.call('HDEL', KEYS[3], owner) end
      redis.call('HSET', KEYS[4], job, ARGV[2] .. ' ' .. spec)
      table.insert(out, spec)
      room = room - 1
    end
  end
end
return out
`)

// withdrawScript takes a waiting job out of its owner's list (a cancel).
var withdrawScript = redis.NewScript(`
local spec = redis.call('HGET', KEYS[2], ARGV[1])
if not spec then return 0 end
local w = cjson.decode(spec)
redis.call('HDEL', KEYS[2], ARGV[1])
local list = ARGV[2] .. w.owner
redis.call('LREM', list, 0, ARGV[1])
if redis.call('LLEN', list) == 0 then redis.call('LREM', KEYS[1], 0, w.owner) end
if redis.call('HINCRBY', KEYS[3], w.owner, -(tonumber(w.size) or 0)) <= 0 then redis.call('HDEL', KEYS[3], w.owner) end
return 1
`)

var fairKeys = []string{ringKey, specsKey, bytesKey, movingKey, asynqPending}

// Submit queues p behind its owner's other waiting jobs; the dispatcher
// (Dispatch) later hands it to asynq. size is the input's size, counted
// against the owner's cap on waiting bytes (see Waiting).
func (q *Queue) Submit(ctx context.Context, p Payload, size int64, timeout time.Duration, maxRetry int) error {
	p.Retention = q.Retention
	b, err := json.Marshal(waitingJob{Owner: p.Owner, Size: size, Payload: p, Timeout: timeout, MaxRetry: maxRetry})
	if err != nil {
		return err
	}
	if err := submitScript.Run(ctx, q.rdb, fairKeys[:3], p.Owner, p.JobID, b, size, listPrefix).Err(); err != nil {
		return fmt.Errorf("queueing job %s: %w", p.JobID, err)
	}
	return nil
}

// ErrBlobStore wraps a failure to write to the object store, which the
// API answers apart from Redis's (both are 503s to retry).
var ErrBlobStore = errors.New("the object store failed")

// SubmitInput stores a job's input and submits it (Submit): in one round
// trip to Redis when blobs are in Redis, else the input's object first,
// so no task ever names an input not yet written. A submission that
// fails after its input was written deletes it.
func (q *Queue) SubmitInput(ctx context.Context, p Payload, input []byte, timeout time.Duration, maxRetry int) error {
	if !q.BlobsInRedis() {
		if err := q.Blobs.Put(ctx, InputKey(p.JobID), input, q.Retention); err != nil {
			return fmt.Errorf("storing job %s's input: %w: %w", p.JobID, ErrBlobStore, err)
		}
		err := q.Submit(ctx, p, int64(len(input)), timeout, maxRetry)
		if err != nil {
			_ = q.Blobs.Delete(context.WithoutCancel(ctx), InputKey(p.JobID))
		}
		return err
	}
	p.Retention = q.Retention
	size := int64(len(input))
	b, err := json.Marshal(waitingJob{Owner: p.Owner, Size: size, Payload: p, Timeout: timeout, MaxRetry: maxRetry})
	if err != nil {
		return err
	}
	pipe := q.rdb.Pipeline()
	pipe.Set(ctx, InputKey(p.JobID), input, q.Retention)
	// EVALSHA alone would fail on a Redis that has not seen the script
	// (restarted, or new), and a pipeline cannot fall back to EVAL; the
	// script is short, and Redis keeps it compiled by its digest anyway.
	submitScript.Eval(ctx, pipe, fairKeys[:3], p.Owner, p.JobID, b, size, listPrefix)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("queueing job %s: %w", p.JobID, err)
	}
	return nil
}

// Load is what the API's admission reads: the queue's depth (Depth) and
// one owner's waiting jobs and their input bytes (Waiting).
type Load struct {
	Depth    int
	KeyJobs  int
	KeyBytes int64
}

// Load reads the depth and owner's waiting jobs in one round trip.
func (q *Queue) Load(ctx context.Context, owner string) (Load, error) {
	pipe := q.rdb.Pipeline()
	depth := q.depthCmds(ctx, pipe)
	n := pipe.LLen(ctx, listPrefix+owner)
	sz := pipe.HGet(ctx, bytesKey, owner)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Load{}, err
	}
	l := Load{KeyJobs: int(n.Val())}
	l.KeyBytes, _ = sz.Int64()
	for _, c := range depth {
		l.Depth += int(c.Val())
	}
	return l, nil
}

// Waiting returns how many of owner's jobs wait for the dispatcher and
// their input bytes: what the per-key caps bound.
func (q *Queue) Waiting(ctx context.Context, owner string) (jobs int, bytes int64, err error) {
	pipe := q.rdb.Pipeline()
	n := pipe.LLen(ctx, listPrefix+owner)
	sz := pipe.HGet(ctx, bytesKey, owner)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	bytes, _ = sz.Int64()
	return int(n.Val()), bytes, nil
}

// Dispatch moves waiting jobs into asynq, round-robin across owners, while
// asynq holds fewer than target pending tasks (target is the workers'
// total concurrency), and returns how many it moved, waking the workers
// that wait for one (Waker) once one is enqueued. A job whose enqueue
// fails stays in "moving" and is enqueued again by Reclaim.
func (q *Queue) Dispatch(ctx context.Context, target int) (int, error) {
	res, err := dispatchScript.Run(ctx, q.rdb, fairKeys, target, time.Now().UnixMilli(), listPrefix).StringSlice()
	if err != nil {
		return 0, fmt.Errorf("dispatching jobs: %w", err)
	}
	var errs []error
	enqueued := 0
	for _, spec := range res {
		if err := q.enqueueMoving(ctx, spec); err != nil {
			errs = append(errs, err)
		} else {
			enqueued++
		}
	}
	if enqueued > 0 {
		q.publishWake(ctx)
	}
	return len(res), errors.Join(errs...)
}

// Reclaim enqueues the jobs a dispatcher moved but did not enqueue (it
// died, or Redis went away in between) for longer than reclaimAfter.
func (q *Queue) Reclaim(ctx context.Context) error {
	moving, err := q.rdb.HGetAll(ctx, movingKey).Result()
	if err != nil {
		return err
	}
	var errs []error
	moved := false
	for _, v := range moving {
		at, spec, _ := strings.Cut(v, " ")
		ms, _ := strconv.ParseInt(at, 10, 64)
		if time.Since(time.UnixMilli(ms)) <= reclaimAfter {
			continue
		}
		if err := q.enqueueMoving(ctx, spec); err != nil {
			errs = append(errs, err)
		} else {
			moved = true
		}
	}
	if moved {
		q.publishWake(ctx)
	}
	return errors.Join(errs...)
}

func (q *Queue) enqueueMoving(ctx context.Context, spec string) error {
	var w waitingJob
	if err := json.Unmarshal([]byte(spec), &w); err != nil || w.Payload.JobID == "" {
		return fmt.Errorf("a moving job is not valid JSON: %v", err)
	}
	err := q.Enqueue(ctx, w.Payload, w.Timeout, w.MaxRetry)
	if err != nil && !errors.Is(err, ErrDuplicate) {
		return err
	}
	return q.rdb.HDel(ctx, movingKey, w.Payload.JobID).Err()
}

// withdraw takes a job that still waits in its owner's list out of it. It
// reports whether the job was waiting.
func (q *Queue) withdraw(ctx context.Context, job string) (bool, error) {
	n, err := withdrawScript.Run(ctx, q.rdb, fairKeys[:3], job, listPrefix).Int()
	return n == 1, err
}

// WorkerSlots is the total concurrency of the live workers: how many jobs
// asynq should hold ready (Dispatch's target).
func (q *Queue) WorkerSlots() (int, error) {
	servers, err := q.inspector.Servers()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range servers {
		if s.Status == "active" {
			n += s.Concurrency
		}
	}
	return n, nil
}
