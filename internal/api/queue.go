package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/renderbox/renderbox/internal/blobs"
	"github.com/renderbox/renderbox/internal/bytesize"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
)

// RunQueue runs this process's share of the queue's upkeep until ctx
// ends; run one per API process (any number of them may run at once):
//
//   - the dispatcher moves waiting jobs round-robin across keys into
//     asynq, keeping asynq's pending list at the workers' total
//     concurrency (queue.Dispatch), woken by every submission and every
//     result event and otherwise four times a second;
//   - jobs a dead dispatcher left half-moved are enqueued again
//     (queue.Reclaim);
//   - archived tasks past the retention are deleted (queue.DeleteExpired),
//     and so are objects of an object store (blobs.Sweeper);
//   - jobs the queue lost are failed (reconcile).
func (s *Server) RunQueue(ctx context.Context) error {
	s.setup()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	// The janitor looks ten times per retention period, at most once a
	// minute, so nothing outlives the retention by more than a tenth.
	janitorEvery := min(time.Minute, s.Queue.Retention/10)
	var slots int
	var slotsAt, reclaimAt, janitorAt, reconcileAt time.Time
	var walk ledger.JobMark
	failing := false
	for {
		now := time.Now()
		var err error
		if now.Sub(slotsAt) >= time.Second {
			var n int
			if n, err = s.Queue.WorkerSlots(); err == nil {
				slots, slotsAt = max(1, n), now
			}
		}
		if err == nil && slots > 0 {
			_, err = s.Queue.Dispatch(ctx, slots)
		}
		if err == nil && now.Sub(reclaimAt) >= time.Second {
			if err = s.Queue.Reclaim(ctx); err == nil {
				reclaimAt = now
			}
		}
		if err == nil && now.Sub(janitorAt) >= janitorEvery {
			var n int
			if n, err = s.Queue.DeleteExpired(ctx); err == nil {
				if n > 0 {
					s.Logger.Info("deleted archived tasks past the retention", "count", n)
				}
				if err = s.sweepBlobs(ctx, now); err == nil {
					janitorAt = now
				}
			}
		}
		if err == nil && now.Sub(reconcileAt) >= s.reconcileEvery() {
			if walk, err = s.reconcile(ctx, walk); err == nil {
				reconcileAt = now
			}
		}
		// Redis away: say so once, not four times a second.
		if err != nil && !failing && ctx.Err() == nil {
			s.Logger.Error("queue upkeep (dispatching, reclaiming, expiring, reconciling)", "err", err)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return nil
		case <-s.dispatchWake:
		case <-tick.C:
		}
	}
}

// wakeDispatcher asks the dispatcher to run now: a job was submitted, or
// one started or ended and made room in asynq.
func (s *Server) wakeDispatcher() {
	select {
	case s.dispatchWake <- struct{}{}:
	default:
	}
}

// memoryGuard says when Redis is too full to take another job: used
// memory at or over highWater of maxmemory. INFO is read at most once a
// second; the bytes this process stored since are added to its answer, so
// a burst within that second cannot overshoot.
type memoryGuard struct {
	q         *queue.Queue
	highWater float64

	mu    sync.Mutex
	at    time.Time
	mem   queue.Memory
	since int64
	// warned is when the last refusal was logged: once a minute at most.
	warned time.Time
}

// firstRefusal reports whether a refusal should be logged: the first in a
// minute.
func (g *memoryGuard) firstRefusal() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.warned) < time.Minute {
		return false
	}
	g.warned = time.Now()
	return true
}

// full reports whether Redis is past the high-water mark, with the
// estimate of its used memory and the mark.
func (g *memoryGuard) full(ctx context.Context) (full bool, used, mark int64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.at) >= time.Second {
		m, err := g.q.Memory(ctx)
		if err != nil {
			return false, 0, 0, err
		}
		g.mem, g.at, g.since = m, time.Now(), 0
	}
	if g.mem.Max == 0 {
		return false, g.mem.Used, 0, nil // an unbounded Redis: nothing to keep under
	}
	mark = int64(g.highWater * float64(g.mem.Max))
	used = g.mem.Used + g.since
	return used >= mark, used, mark, nil
}

// add counts n bytes this process stored.
func (g *memoryGuard) add(n int64) {
	g.mu.Lock()
	g.since += n
	g.mu.Unlock()
}

// jobOverhead is what a job costs Redis besides its input: the task, its
// payload, the ledger's event and the bookkeeping around them. The input
// itself is counted twice until the next INFO sample: Redis's allocator
// rounds a large value up to its size class (a 1 MiB value takes 1.25 MiB)
// and the connection's query buffer that received it is released lazily,
// so a burst of submissions within one second costs Redis up to about
// twice its bytes.
const jobOverhead = 4 << 10

// admit refuses a job of size input bytes from key when Redis is near its
// maxmemory or the queue holds its most jobs (503 queue_full), or the key
// already has its share of the queue waiting (429 key_queue_full); it
// answers the request itself and returns false then.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, key string, size int64) bool {
	full, used, mark, err := s.memory.full(r.Context())
	if err != nil {
		w.Header().Set("Retry-After", "5")
		problem(w, http.StatusServiceUnavailable, "unavailable", "the queue is unreachable; retry later")
		return false
	}
	if full {
		if s.memory.firstRefusal() {
			s.Logger.Warn("refusing jobs: Redis is past its high-water mark", "used_bytes", used, "high_water_bytes", mark)
		}
		w.Header().Set("Retry-After", "30")
		problem(w, http.StatusServiceUnavailable, "queue_full", "the queue's storage is nearly full; retry later")
		return false
	}
	load, err := s.Queue.Load(r.Context(), key)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		problem(w, http.StatusServiceUnavailable, "unavailable", "the queue is unreachable; retry later")
		return false
	}
	jobs, bytes := load.KeyJobs, load.KeyBytes
	switch {
	case load.Depth >= s.Limits.MaxQueueDepth:
		w.Header().Set("Retry-After", "10")
		problem(w, http.StatusServiceUnavailable, "queue_full", fmt.Sprintf("%d jobs are waiting; retry later", load.Depth))
		return false
	case jobs >= s.Limits.MaxQueuedPerKey:
		w.Header().Set("Retry-After", "10")
		problem(w, http.StatusTooManyRequests, "key_queue_full", fmt.Sprintf("this key already has %d jobs waiting, its most; retry when some have started", jobs))
		return false
	case bytes+size > s.Limits.MaxQueuedBytesPerKey:
		w.Header().Set("Retry-After", "10")
		problem(w, http.StatusTooManyRequests, "key_queue_full", fmt.Sprintf("this key's waiting jobs already hold %s of input; with this one they would pass %s; retry when some have started", bytesize.String(bytes), bytesize.String(s.Limits.MaxQueuedBytesPerKey)))
		return false
	}
	return true
}

// sweepBlobs deletes the documents of an object store written longer than
// the retention ago; Redis's expire by their TTL.
func (s *Server) sweepBlobs(ctx context.Context, now time.Time) error {
	sw, ok := s.Queue.Blobs.(blobs.Sweeper)
	if !ok {
		return nil
	}
	n, err := sw.DeleteBefore(ctx, now.Add(-s.Queue.Retention))
	if n > 0 {
		s.Logger.Info("deleted documents past the retention from the object store", "count", n)
	}
	return err
}
